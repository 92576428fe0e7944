//! The plot of `--clients` (`clients-throughput.png`/`.svg`): aggregate RPCs per second
//! against the number of clients, per size and mode, beside the raw TCP echo; below, our
//! rate over the raw echo's.

use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::{
    Draw, SIZE, Series, fail, lines, number_label, ratio_chart, register_font, write_png_and_svg,
};
use crate::Error;
use crate::clients::output::Row;

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// The series: per (mode, size) ours and the raw echo (values), and their ratio.
fn series(rows: &[Row]) -> (Vec<Series>, Vec<Series>) {
    let mut keys: Vec<(&str, u64)> = rows.iter().map(|r| (r.mode, r.size)).collect();
    keys.dedup();
    keys.sort_unstable();
    keys.dedup();
    let (mut values, mut ratios) = (Vec::new(), Vec::new());
    for (i, &(mode, size)) in keys.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let mine: Vec<&Row> = rows
            .iter()
            .filter(|r| (r.mode, r.size) == (mode, size))
            .collect();
        let n = |r: &Row| r.rpc.clients as f64;
        let ours = mine
            .iter()
            .map(|r| (n(r), r.rpc.rate))
            .filter(|p| p.1 > 0.0);
        values.push(Series {
            label: format!("{mode}, {size} B, {} API", mine[0].api),
            color,
            points: ours.collect(),
        });
        let raw: Vec<(f64, f64)> = mine
            .iter()
            .filter_map(|r| r.raw.map(|raw| (n(r), raw.rate)))
            .filter(|p| p.1 > 0.0)
            .collect();
        if !raw.is_empty() && mode != "overlap" {
            values.push(Series {
                label: format!("raw TCP echo, {size} B"),
                color: RGBColor(color.0 / 2, color.1 / 2, color.2 / 2),
                points: raw,
            });
        }
        let ratio: Vec<(f64, f64)> = mine
            .iter()
            .filter_map(|r| {
                r.raw
                    .filter(|raw| raw.rate > 0.0)
                    .map(|raw| (n(r), r.rpc.rate / raw.rate))
            })
            .collect();
        if !ratio.is_empty() {
            ratios.push(Series {
                label: format!("{mode}, {size} B / raw echo"),
                color,
                points: ratio,
            });
        }
    }
    values.retain(|s| !s.points.is_empty());
    (values, ratios)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    values: &[Series],
    ratios: &[Series],
) -> Result<(), Error> {
    root.fill(&WHITE).map_err(fail)?;
    let (top, bottom) = root.split_vertically(SIZE.1 * 68 / 100);
    let most = |s: &[Series], axis: fn(&(f64, f64)) -> f64| {
        s.iter()
            .flat_map(|s| s.points.iter().map(axis))
            .fold(1.0f64, f64::max)
    };
    let x = 0.0..most(values, |p| p.0) + 1.0;
    let y = 0.0..most(values, |p| p.1) * 1.15;
    let mut chart = ChartBuilder::on(&top)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(x.clone(), y)
        .map_err(fail)?;
    chart
        .configure_mesh()
        .x_desc("clients (connections)")
        .y_desc("RPC/s (all clients)")
        .x_label_formatter(&|v| number_label(*v))
        .y_label_formatter(&|v| number_label(*v))
        .draw()
        .map_err(fail)?;
    lines(&mut chart, values)?;
    let mut chart = ratio_chart(&bottom, x, ratios)?;
    chart
        .configure_mesh()
        .x_desc("clients (connections)")
        .y_desc("RPC/s / raw echo")
        .x_label_formatter(&|v| number_label(*v))
        .draw()
        .map_err(fail)?;
    lines(&mut chart, ratios)?;
    root.present().map_err(fail)?;
    Ok(())
}

/// Writes `clients-throughput.{png,svg}` into `dir`; returns their paths.
pub(crate) fn write(dir: &Path, rows: &[Row], what: &str) -> Result<Vec<PathBuf>, Error> {
    register_font()?;
    std::fs::create_dir_all(dir)?;
    let (values, ratios) = series(rows);
    let figure = Throughput {
        title: format!("Many clients: {what}"),
        values,
        ratios,
    };
    Ok(write_png_and_svg(dir, "clients-throughput", &figure)?.to_vec())
}

/// The figure: rates above, ratios to the raw echo below.
struct Throughput {
    title: String,
    values: Vec<Series>,
    ratios: Vec<Series>,
}

impl Draw for Throughput {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), Error> {
        draw(root, &self.title, &self.values, &self.ratios)
    }
}
