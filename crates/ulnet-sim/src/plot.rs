//! SVG plots: bandwidth over time of a run, and bandwidth against a swept parameter. Drawn
//! with plotters' SVG backend, which writes text as SVG text elements and needs no font
//! files or system libraries.

use plotters::prelude::*;

use crate::results::RunResults;

/// Plot size in pixels.
const SIZE: (u32, u32) = (900, 500);

/// Why a plot could not be drawn.
#[derive(Debug, thiserror::Error)]
#[error("plot: {0}")]
pub struct PlotError(String);

fn plot_error<E: std::fmt::Display>(error: E) -> PlotError {
    PlotError(error.to_string())
}

/// Bandwidth of each workload over time, one line each.
pub fn bandwidth_over_time(results: &RunResults) -> Result<String, PlotError> {
    let interval = results.sample_interval_seconds;
    let series: Vec<(String, Vec<(f64, f64)>)> = results
        .workloads
        .iter()
        .map(|w| {
            let points = w
                .bandwidth_series_mb_per_s
                .iter()
                .enumerate()
                .map(|(i, mb)| ((i as f64 + 0.5) * interval, *mb))
                .collect();
            (w.name.clone(), points)
        })
        .collect();
    let x_max = results.simulated_seconds.max(interval);
    let title = format!("{}: bandwidth over time (seed {})", results.scenario, results.seed);
    lines(&title, "virtual time (s)", "MB/s", (0.0, x_max), &series)
}

/// Bandwidth against a parameter's values: one line per series (x, MB/s).
pub fn sweep(
    title: &str,
    parameter: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String, PlotError> {
    let xs = series.iter().flat_map(|(_, points)| points.iter().map(|p| p.0));
    let (low, high) = xs.fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (low, high) = if low <= high { (low, high.max(low + 1.0)) } else { (0.0, 1.0) };
    lines(title, parameter, "MB/s", (low, high), series)
}

fn lines(
    title: &str,
    x_label: &str,
    y_label: &str,
    (x_min, x_max): (f64, f64),
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<String, PlotError> {
    let y_max = series
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x_min..x_max, 0.0..y_max)
            .map_err(plot_error)?;
        chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw().map_err(plot_error)?;
        for (index, (name, points)) in series.iter().enumerate() {
            let color = Palette99::pick(index).to_rgba();
            chart
                .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))
                .map_err(plot_error)?
                .label(name.as_str())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2))
                });
            if points.len() <= 64 {
                chart
                    .draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
                    .map_err(plot_error)?;
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}
