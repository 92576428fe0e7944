//! Plots of a sweep (PNG and SVG): latency and bandwidth against size, ours vs the raw
//! transport's limit vs a compared CSV, and below each the ratios.

pub(crate) mod clients;

use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::Error;
use crate::sweep::compare::Reference;
use crate::sweep::measure::Measured;
use crate::sweep::report::bandwidth;

/// The font of the PNG plots (SVG names `sans-serif` and leaves it to the viewer).
static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
/// Plot size in pixels.
pub(crate) const SIZE: (u32, u32) = (1000, 760);

/// One line of a chart.
pub(crate) struct Series {
    /// Its legend.
    pub label: String,
    /// Its colour.
    pub color: RGBColor,
    /// Its points (x, y).
    pub points: Vec<(f64, f64)>,
}

/// One figure: the values above, their ratios below.
struct Figure {
    title: String,
    unit: &'static str,
    values: Vec<Series>,
    ratios: Vec<Series>,
}

const OURS: RGBColor = RGBColor(31, 119, 180);
const FIRST: RGBColor = RGBColor(255, 127, 14);
const RAW: RGBColor = RGBColor(44, 160, 44);
const COMPARED: RGBColor = RGBColor(214, 39, 40);
const STREAM: RGBColor = RGBColor(148, 103, 189);
const STREAM_SIZED: RGBColor = RGBColor(140, 86, 75);

/// A plotting error.
pub(crate) fn fail(e: impl std::fmt::Display) -> Error {
    format!("plot: {e}").into()
}

/// Points of a per-size value (`f(size, seconds)` of a median), finite and positive only.
fn points(
    rows: &[Measured],
    value: impl Fn(&Measured) -> Option<f64>,
    scale: impl Fn(u64, f64) -> f64,
) -> Vec<(f64, f64)> {
    rows.iter()
        .filter_map(|m| value(m).map(|v| (m.size.bytes as f64, scale(m.size.bytes, v))))
        .filter(|&(_, y)| y.is_finite() && y > 0.0)
        .collect()
}

fn figure(
    rows: &[Measured],
    reference: Option<&Reference>,
    title: &str,
    unit: &'static str,
    scale: impl Fn(u64, f64) -> f64 + Copy,
) -> Figure {
    let mut values = vec![
        Series {
            label: "RPC, steady state (p50)".into(),
            color: OURS,
            points: points(rows, |m| m.steady.p50(), scale),
        },
        Series {
            label: "first RPC of a new connection (p50)".into(),
            color: FIRST,
            points: points(rows, |m| m.first.p50(), scale),
        },
        Series {
            label: "raw TCP round trip, same run (p50)".into(),
            color: RAW,
            points: points(rows, |m| m.raw.p50(), scale),
        },
    ];
    let mut ratios = vec![Series {
        label: "steady RPC / raw TCP round trip (time)".into(),
        color: RAW,
        points: points(
            rows,
            |m| m.steady.p50().zip(m.raw.p50()).map(|(a, b)| a / b),
            |_, r| r,
        ),
    }];
    if let Some(reference) = reference {
        values.push(Series {
            label: format!("{} (median transfer_time)", reference.label),
            color: COMPARED,
            points: reference
                .transfer
                .iter()
                .map(|(&size, &t)| (size as f64, scale(size, t)))
                .collect(),
        });
        ratios.push(Series {
            label: format!("first RPC / {} (time)", reference.label),
            color: COMPARED,
            points: points(
                rows,
                |m| {
                    m.first
                        .p50()
                        .zip(reference.transfer.get(&m.size.bytes))
                        .map(|(a, b)| a / b)
                },
                |_, r| r,
            ),
        });
    }
    values.retain(|s| !s.points.is_empty());
    ratios.retain(|s| !s.points.is_empty());
    Figure {
        title: title.into(),
        unit,
        values,
        ratios,
    }
}

impl Figure {
    /// Adds the raw one-direction TCP streams (GB/s; from 1 MiB, software transport on this
    /// machine) and the steady RPC's bandwidth over the stream of messages of its size.
    fn with_streams(mut self, rows: &[Measured]) -> Self {
        let gbps = |_, bw: f64| bw / 1e9;
        let streams = [
            (
                "raw TCP stream, 1 MiB messages",
                STREAM,
                points(rows, |m| m.stream_bw, gbps),
            ),
            (
                "raw TCP stream, messages of the size",
                STREAM_SIZED,
                points(rows, |m| m.stream_sized_bw, gbps),
            ),
        ];
        for (label, color, points) in streams {
            if !points.is_empty() {
                self.values.push(Series {
                    label: label.into(),
                    color,
                    points,
                });
            }
        }
        let ratio = points(
            rows,
            |m| {
                let rpc = m.steady.p50().map(|t| bandwidth(m.size.bytes, t));
                rpc.zip(m.stream_sized_bw).map(|(a, b)| a / b)
            },
            |_, r| r,
        );
        if !ratio.is_empty() {
            self.ratios.push(Series {
                label: "steady RPC / raw stream of the size (bandwidth)".into(),
                color: STREAM_SIZED,
                points: ratio,
            });
        }
        self
    }
}

/// A range around `values` with some margin, for a log axis.
pub(crate) fn log_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return 1.0..10.0;
    }
    lo / 1.6..hi * 1.6
}

/// `1k`, `10M`, `1G` (powers of 1000: the log axis has its ticks there) or the plain number.
fn bytes_label(v: f64) -> String {
    for (unit, name) in [(1e9, "G"), (1e6, "M"), (1e3, "k")] {
        if v >= unit {
            return format!("{}{name}", number_label(v / unit));
        }
    }
    number_label(v)
}

/// A tick value with as few digits as it needs.
pub(crate) fn number_label(v: f64) -> String {
    if v >= 10.0 || v == v.round() {
        format!("{v:.0}")
    } else if v >= 0.1 {
        format!("{v:.1}")
    } else if v >= 0.01 {
        format!("{v:.2}")
    } else {
        format!("{v:.0e}")
    }
}

/// Draws `series` as lines with dots, and their legend (if any).
pub(crate) fn lines<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &[Series],
) -> Result<(), Error>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for s in series {
        let color = s.color;
        chart
            .draw_series(LineSeries::new(s.points.clone(), color.stroke_width(2)))
            .map_err(fail)?
            .label(s.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(fail)?;
    }
    if !series.is_empty() {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 15))
            .draw()
            .map_err(fail)?;
    }
    Ok(())
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, f: &Figure) -> Result<(), Error> {
    root.fill(&WHITE).map_err(fail)?;
    let (top, bottom) = root.split_vertically(SIZE.1 * 68 / 100);
    let xs = || f.values.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let x = log_range(xs());
    let y = log_range(f.values.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let mut chart = ChartBuilder::on(&top)
        .caption(&f.title, ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(x.clone().log_scale(), y.log_scale())
        .map_err(fail)?;
    chart
        .configure_mesh()
        .x_desc("bytes each way")
        .y_desc(f.unit)
        .x_label_formatter(&|v| bytes_label(*v))
        .y_label_formatter(&|v| number_label(*v))
        .draw()
        .map_err(fail)?;
    lines(&mut chart, &f.values)?;

    let mut chart = ratio_chart(&bottom, x.log_scale(), &f.ratios)?;
    chart
        .configure_mesh()
        .x_desc("bytes each way")
        .y_desc("ratio")
        .x_label_formatter(&|v| bytes_label(*v))
        .draw()
        .map_err(fail)?;
    let (x0, x1) = (chart.x_range().start, chart.x_range().end);
    chart
        .draw_series(LineSeries::new(vec![(x0, 1.0), (x1, 1.0)], BLACK.mix(0.5)))
        .map_err(fail)?;
    lines(&mut chart, &f.ratios)?;
    root.present().map_err(fail)?;
    Ok(())
}

/// The chart of the ratios below a figure: x as given, y from 0 to above the largest ratio
/// (at least 1).
pub(crate) fn ratio_chart<'a, DB, X>(
    area: &'a DrawingArea<DB, Shift>,
    x: X,
    ratios: &[Series],
) -> Result<ChartContext<'a, DB, Cartesian2d<X::CoordDescType, RangedCoordf64>>, Error>
where
    DB: DrawingBackend,
    X: AsRangedCoord<Value = f64>,
{
    let top = ratios
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(1.0f64, f64::max);
    ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(x, 0.0..top * 1.15)
        .map_err(fail)
}

/// A figure that draws itself on any backend (PNG or SVG).
pub(crate) trait Draw {
    /// Draws the whole figure on `root` and presents it.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), Error>;
}

impl Draw for Figure {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), Error> {
        draw(root, self)
    }
}

/// Writes `figure` as `NAME.png` and `NAME.svg` into `dir`; returns their paths.
pub(crate) fn write_png_and_svg(
    dir: &Path,
    name: &str,
    figure: &impl Draw,
) -> Result<[PathBuf; 2], Error> {
    let png = dir.join(format!("{name}.png"));
    figure.draw(&BitMapBackend::new(&png, SIZE).into_drawing_area())?;
    let svg = dir.join(format!("{name}.svg"));
    figure.draw(&SVGBackend::new(&svg, SIZE).into_drawing_area())?;
    Ok([png, svg])
}

/// Makes the embedded font the PNG plots' `sans-serif` (once per process).
pub(crate) fn register_font() -> Result<(), Error> {
    static REGISTER: Once = Once::new();
    let mut registered = Ok(());
    REGISTER.call_once(|| {
        registered = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| "plot: the embedded font does not load");
    });
    Ok(registered?)
}

/// Writes `latency.{png,svg}` and `bandwidth.{png,svg}` into `dir`; returns their paths.
pub(crate) fn write_plots(
    dir: &Path,
    rows: &[Measured],
    reference: Option<&Reference>,
    what: &str,
) -> Result<Vec<PathBuf>, Error> {
    register_font()?;
    let figures = [
        (
            "latency",
            figure(
                rows,
                reference,
                &format!("RPC latency: {what}"),
                "µs",
                |_, t| t * 1e6,
            ),
        ),
        (
            "bandwidth",
            figure(
                rows,
                reference,
                &format!("RPC bandwidth (2 × size / time): {what}"),
                "GB/s",
                |size, t| bandwidth(size, t) / 1e9,
            )
            .with_streams(rows),
        ),
    ];
    let mut written = Vec::new();
    for (name, f) in &figures {
        written.extend(write_png_and_svg(dir, name, f)?);
    }
    Ok(written)
}
