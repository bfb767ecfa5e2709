//! lst's NID expressions: brackets anywhere, expanded repeatedly, each result a NID with pid
//! 12345. lustre: lnet/utils/lst.c `expand_lstr()`, `expand_strs()`, `lst_parse_nids()`.

use ulnet::{LNET_PID_LUSTRE, Nid, ProcessId};

/// The most strings one expression may expand to. lst has no bound (and loops forever on a
/// zero stride); a typo like `[0-4294967295]` must not eat the machine.
pub const MAX_NID_EXPANSION: usize = 1 << 20;

/// Why an expression did not give a list of NIDs. The texts are lst's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NidExprError {
    /// A bracket without its pair, an empty bracket, or an element that is not `N`, `N-M`
    /// (N < M) or `N-M/S`.
    #[error("Syntax error in \"{0}\"")]
    Syntax(String),
    /// More than [`MAX_NID_EXPANSION`] strings.
    #[error("Syntax error in \"{0}\"")]
    TooMany(String),
    /// A string that is no NID.
    #[error("Invalid nid: {0}")]
    InvalidNid(String),
}

/// Expands `expression` and parses every result as a NID (`lst_parse_nids()`).
pub fn parse_nids(expression: &str) -> Result<Vec<ProcessId>, NidExprError> {
    let strings = expand(expression)?;
    strings
        .into_iter()
        .map(|text| {
            text.parse::<Nid>()
                .ok()
                .filter(|nid| !nid.is_any())
                .map(|nid| ProcessId::new(nid, LNET_PID_LUSTRE))
                .ok_or(NidExprError::InvalidNid(text))
        })
        .collect()
}

/// `expand_strs()`: brackets expanded until none is left, results in natural order.
pub fn expand(expression: &str) -> Result<Vec<String>, NidExprError> {
    let mut list = vec![expression.to_string()];
    loop {
        let mut expanded = false;
        let mut next = Vec::with_capacity(list.len());
        for text in list {
            match expand_one(&text, &mut next) {
                Ok(true) => expanded = true,
                Ok(false) => {}
                Err(()) => return Err(NidExprError::Syntax(expression.to_string())),
            }
            if next.len() > MAX_NID_EXPANSION {
                return Err(NidExprError::TooMany(expression.to_string()));
            }
        }
        list = next;
        if !expanded {
            return Ok(list);
        }
    }
}

/// `expand_lstr()`: expands the first bracket of `text` into `out`; `Ok(false)` when there
/// is none (the text goes to `out` as is).
fn expand_one(text: &str, out: &mut Vec<String>) -> Result<bool, ()> {
    let Some(open) = text.find('[') else {
        out.push(text.to_string());
        return Ok(false);
    };
    let (prefix, rest) = text.split_at(open);
    let rest = &rest[1..];
    let close = rest.find(']').ok_or(())?;
    if close == 0 {
        return Err(());
    }
    let (expression, postfix) = rest.split_at(close);
    let postfix = &postfix[1..];
    for element in expression.split(',') {
        let (low, high, stride) = parse_element(element).ok_or(())?;
        let mut value = low;
        loop {
            out.push(format!("{prefix}{value}{postfix}"));
            if out.len() > MAX_NID_EXPANSION {
                return Ok(true);
            }
            match value.checked_add(stride) {
                Some(next) if next <= high => value = next,
                _ => break,
            }
        }
    }
    Ok(true)
}

/// `N`, `N-M` with N < M, or `N-M/S` with N < M (and S > 0, which lst does not check).
fn parse_element(element: &str) -> Option<(u32, u32, u32)> {
    if let Some(value) = number(element) {
        return Some((value, value, 1));
    }
    let (low, rest) = element.split_once('-')?;
    let low = number(low)?;
    let (high, stride) = match rest.split_once('/') {
        Some((high, stride)) => (number(high)?, number(stride)?),
        None => (number(rest)?, 1),
    };
    (low < high && stride > 0).then_some((low, high, stride))
}

/// A decimal `%u`.
fn number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_examples_expand_in_order() {
        assert_eq!(
            expand("192.168.10.[8,10,12-16]@tcp").unwrap(),
            [8, 10, 12, 13, 14, 15, 16].map(|i| format!("192.168.10.{i}@tcp"))
        );
        let odd = expand("192.168.1.[1-253/2]@o2ib").unwrap();
        assert_eq!(odd.len(), 127);
        assert_eq!(odd[1], "192.168.1.3@o2ib");
        assert_eq!(odd[126], "192.168.1.253@o2ib");
    }

    #[test]
    fn brackets_anywhere_expand_repeatedly() {
        assert_eq!(
            expand("10.[1-2].0.[5,7]@tcp").unwrap(),
            ["10.1.0.5@tcp", "10.1.0.7@tcp", "10.2.0.5@tcp", "10.2.0.7@tcp"]
        );
        assert_eq!(expand("0@lo").unwrap(), ["0@lo"]);
    }

    #[test]
    fn nids_get_the_lustre_pid() {
        let ids = parse_nids("10.0.0.[1-2]@tcp").unwrap();
        assert_eq!(ids.len(), 2);
        assert!(ids.iter().all(|id| id.pid == LNET_PID_LUSTRE));
        assert_eq!(ids[1].to_string(), "12345-10.0.0.2@tcp");
    }

    #[test]
    fn unclosed_bracket_is_a_syntax_error() {
        let error = parse_nids("10.0.0.[1-2@tcp").unwrap_err();
        assert_eq!(error, NidExprError::Syntax("10.0.0.[1-2@tcp".into()));
        assert_eq!(error.to_string(), "Syntax error in \"10.0.0.[1-2@tcp\"");
    }

    #[test]
    fn empty_bracket_is_a_syntax_error() {
        assert!(matches!(expand("10.0.0.[]@tcp"), Err(NidExprError::Syntax(_))));
    }

    #[test]
    fn descending_range_is_a_syntax_error() {
        assert!(matches!(expand("10.0.0.[5-1]@tcp"), Err(NidExprError::Syntax(_))));
        assert!(matches!(expand("10.0.0.[5-5]@tcp"), Err(NidExprError::Syntax(_))));
    }

    #[test]
    fn zero_stride_is_a_syntax_error() {
        assert!(matches!(expand("10.0.0.[1-5/0]@tcp"), Err(NidExprError::Syntax(_))));
    }

    #[test]
    fn huge_expansion_is_refused() {
        assert!(matches!(expand("[0-4294967295]@tcp"), Err(NidExprError::TooMany(_))));
    }

    #[test]
    fn bad_nid_is_named() {
        assert_eq!(
            parse_nids("10.0.0.[1-2]@nosuchnet").unwrap_err(),
            NidExprError::InvalidNid("10.0.0.1@nosuchnet".into())
        );
    }

    proptest::proptest! {
        #[test]
        fn ranges_expand_to_their_length(low in 0u32..200, span in 1u32..50, stride in 1u32..7) {
            let high = low + span;
            let list = expand(&format!("x[{low}-{high}/{stride}]")).unwrap();
            proptest::prop_assert_eq!(list.len() as u32, span / stride + 1);
        }
    }
}
