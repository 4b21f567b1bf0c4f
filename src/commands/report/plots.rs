//! The report's plots, drawn with plotters as inline SVG: no fonts are read (text stays SVG
//! `<text>`, drawn by the browser) and nothing outside the page is referenced.

use plotters::prelude::*;

use super::data::{DistanceCount, QualityRow};

/// Every plot's size in pixels; the page scales it down to the column's width.
const SIZE: (u32, u32) = (640, 300);
const FONT: &str = "sans-serif";

const BAR: RGBColor = RGBColor(52, 101, 164);
const POINT: RGBColor = RGBColor(204, 102, 0);
const PRECISION: RGBColor = RGBColor(31, 119, 180);
const RECALL: RGBColor = RGBColor(214, 39, 40);
const F1: RGBColor = RGBColor(44, 160, 44);

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The SVG as it goes into the HTML page: inline SVG needs no namespace declaration, and
/// dropping it keeps every address out of the page.
fn finish(svg: String) -> String {
    svg.replace(" xmlns=\"http://www.w3.org/2000/svg\"", "")
}

/// A plot that has nothing to show: the reason, centred.
fn message(text: &str) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (SIZE.0, 80)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let style = (FONT, 16.0).into_font().color(&BLACK);
        root.draw(&Text::new(text.to_string(), (20, 30), style))
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(finish(svg))
}

/// Pairs per Hamming distance, one bar for each distance 0..=k.
pub fn distance_histogram(distances: &[DistanceCount], k: u32) -> Result<String, String> {
    // The x axis runs to k (or further if the data does); at least 0..=1, so the axis has a width.
    let last = distances
        .iter()
        .map(|d| d.distance)
        .max()
        .unwrap_or(0)
        .max(k)
        .max(1);
    let most = distances.iter().map(|d| d.pairs).max().unwrap_or(0);
    let top = most + most / 10 + 1;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("Pairs per Hamming distance (k = {k})"), (FONT, 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((0u32..last).into_segmented(), 0u64..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(last as usize + 1)
            .x_desc("Hamming distance")
            .y_desc("pairs")
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                Histogram::vertical(&chart)
                    .style(BAR.filled())
                    .margin(4)
                    .data(distances.iter().map(|d| (d.distance, d.pairs))),
            )
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(finish(svg))
}

/// A tick label of a log axis: whole numbers without decimals.
fn log_tick(value: &f64) -> String {
    if *value >= 1.0 {
        format!("{value:.0}")
    } else {
        String::new()
    }
}

/// Number of groups per group size on log-log axes (sizes run from 2 to very large).
pub fn group_sizes(sizes: &[(u64, u64)]) -> Result<String, String> {
    let points: Vec<(f64, f64)> = sizes
        .iter()
        .filter(|(size, groups)| *size > 0 && *groups > 0)
        .map(|&(size, groups)| (size as f64, groups as f64))
        .collect();
    if points.is_empty() {
        return message("no groups: the run found no near-duplicates");
    }
    let largest = points.iter().map(|p| p.0).fold(1.0, f64::max);
    let most = points.iter().map(|p| p.1).fold(1.0, f64::max);
    // Log axes from just under 1, widened so that one point (min == max) still has a range.
    let floor = 0.8;
    let x_end = (largest * 1.5).max(10.0);
    let y_end = (most * 1.5).max(10.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Groups per group size", (FONT, 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d((floor..x_end).log_scale(), (floor..y_end).log_scale())
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("documents in the group (log scale)")
            .y_desc("groups (log scale)")
            // The log axes' minor lines are dense enough to grey the plot out.
            .light_line_style(WHITE)
            .x_label_formatter(&log_tick)
            .y_label_formatter(&log_tick)
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                points.iter().map(|&(x, y)| {
                    PathElement::new(vec![(x, floor), (x, y)], POINT.stroke_width(2))
                }),
            )
            .map_err(err)?;
        chart
            .draw_series(
                points
                    .iter()
                    .map(|&(x, y)| Circle::new((x, y), 4i32, POINT.filled())),
            )
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(finish(svg))
}

/// One score against k: the rows that have it (a score may be undefined at some k).
fn series(rows: &[QualityRow], pick: fn(&QualityRow) -> Option<f64>) -> Vec<(u32, f64)> {
    rows.iter()
        .filter_map(|r| {
            pick(r)
                .filter(|v| v.is_finite())
                .map(|v| (r.k, v.clamp(0.0, 1.0)))
        })
        .collect()
}

/// Precision, recall and F1 against k, three lines with a legend; y from 0 to 1.
pub fn quality(rows: &[QualityRow]) -> Result<String, String> {
    if rows.is_empty() {
        return message("no scores");
    }
    let first = rows.iter().map(|r| r.k).min().unwrap_or(0);
    let mut last = rows.iter().map(|r| r.k).max().unwrap_or(0);
    if last <= first {
        last = first + 1;
    }
    let lines = [
        ("precision", PRECISION, series(rows, |r| r.precision)),
        ("recall", RECALL, series(rows, |r| r.recall)),
        ("F1", F1, series(rows, |r| r.f1)),
    ];
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption("Precision, recall and F1 against k", (FONT, 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(first..last, 0f64..1.02f64)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_labels((last - first) as usize + 1)
            .x_desc("k (Hamming distance)")
            .y_desc("score")
            .draw()
            .map_err(err)?;
        for (label, colour, points) in lines {
            chart
                .draw_series(LineSeries::new(points, colour.stroke_width(2)).point_size(3))
                .map_err(err)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .label_font((FONT, 14))
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(finish(svg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_svg(svg: &str) {
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"), "{svg}");
        assert!(!svg.contains("http"), "{svg}");
    }

    #[test]
    fn plots_draw_on_ordinary_and_degenerate_data() {
        let distances: Vec<DistanceCount> = (0..=3)
            .map(|d| DistanceCount {
                distance: d,
                pairs: [40, 12, 3, 0][d as usize],
            })
            .collect();
        let svg = distance_histogram(&distances, 3).unwrap();
        is_svg(&svg);
        assert!(svg.contains("<rect"), "{svg}");
        assert!(svg.contains("Hamming distance"), "{svg}");
        is_svg(&distance_histogram(&[], 0).unwrap());
        is_svg(
            &distance_histogram(
                &[DistanceCount {
                    distance: 0,
                    pairs: 0,
                }],
                0,
            )
            .unwrap(),
        );

        let svg = group_sizes(&[(2, 30), (3, 4), (120, 1)]).unwrap();
        is_svg(&svg);
        assert!(svg.contains("<circle"), "{svg}");
        is_svg(&group_sizes(&[(2, 1)]).unwrap());
        let none = group_sizes(&[]).unwrap();
        is_svg(&none);
        assert!(none.contains("no groups"), "{none}");

        let rows = [
            QualityRow {
                k: 0,
                precision: Some(1.0),
                recall: Some(0.4),
                f1: Some(0.571),
            },
            QualityRow {
                k: 1,
                precision: Some(0.9),
                recall: Some(0.8),
                f1: Some(0.847),
            },
            QualityRow {
                k: 2,
                precision: None,
                recall: Some(0.9),
                f1: None,
            },
        ];
        let svg = quality(&rows).unwrap();
        is_svg(&svg);
        assert!(svg.contains("precision") && svg.contains("recall") && svg.contains("F1"));
        is_svg(&quality(&rows[..1]).unwrap());
        is_svg(&quality(&[]).unwrap());
    }
}
