/*
 * Differential oracle for ulnet-config's dialect-N emitter: replays an event script through
 * the system libyaml emitter. Build: cc -o libyaml_emit libyaml_emit.c -lyaml
 * Usage: libyaml_emit INDENT EXPLICIT_START EXPLICIT_END < script
 * Script, one event per line: M / m (mapping start/end), S / s (sequence start/end),
 * then scalars "<kind><style><hex text>": kind d (document scalar, quoted_implicit=1) or
 * e (lnetctl-built event, quoted_implicit=0); style p, s (single) or d (double).
 * Written for ulnet (MIT OR Apache-2.0).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static void die(const char *what) { fprintf(stderr, "oracle: %s\n", what); exit(2); }

static void emit(yaml_emitter_t *e, yaml_event_t *ev)
{
	if (!yaml_emitter_emit(e, ev))
		die(e->problem ? e->problem : "emit failed");
}

int main(int argc, char **argv)
{
	yaml_emitter_t e;
	yaml_event_t ev;
	char line[65536];

	if (argc != 4)
		die("usage");
	yaml_emitter_initialize(&e);
	yaml_emitter_set_indent(&e, atoi(argv[1]));
	yaml_emitter_set_output_file(&e, stdout);
	yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
	emit(&e, &ev);
	yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, !atoi(argv[2]));
	emit(&e, &ev);
	while (fgets(line, sizeof(line), stdin)) {
		size_t n = strcspn(line, "\n");
		line[n] = 0;
		switch (line[0]) {
		case 'M':
			yaml_mapping_start_event_initialize(&ev, NULL, (yaml_char_t *)YAML_MAP_TAG, 1, YAML_BLOCK_MAPPING_STYLE);
			break;
		case 'm':
			yaml_mapping_end_event_initialize(&ev);
			break;
		case 'S':
			yaml_sequence_start_event_initialize(&ev, NULL, (yaml_char_t *)YAML_SEQ_TAG, 1, YAML_BLOCK_SEQUENCE_STYLE);
			break;
		case 's':
			yaml_sequence_end_event_initialize(&ev);
			break;
		case 'd':
		case 'e': {
			char text[32768];
			size_t len = 0, i;
			yaml_scalar_style_t style = line[1] == 'p' ? YAML_PLAIN_SCALAR_STYLE :
				line[1] == 's' ? YAML_SINGLE_QUOTED_SCALAR_STYLE : YAML_DOUBLE_QUOTED_SCALAR_STYLE;
			for (i = 2; line[i] && line[i + 1] && len < sizeof(text); i += 2) {
				unsigned int byte;
				sscanf(line + i, "%2x", &byte);
				text[len++] = (char)byte;
			}
			yaml_scalar_event_initialize(&ev, NULL, (yaml_char_t *)YAML_STR_TAG, (yaml_char_t *)text, len, 1, line[0] == 'd', style);
			break;
		}
		default:
			die("bad script line");
		}
		emit(&e, &ev);
	}
	yaml_document_end_event_initialize(&ev, !atoi(argv[3]));
	emit(&e, &ev);
	yaml_stream_end_event_initialize(&ev);
	emit(&e, &ev);
	yaml_emitter_delete(&e);
	return 0;
}
