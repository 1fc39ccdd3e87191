//! Samples of the text exposition: label sets shared by a certificate's samples, values
//! written as Prometheus reads them, label values escaped.

use std::fmt::Write as _;

use time::OffsetDateTime;

use super::family::Metric;

/// The samples of every family (label set and value), kept apart by family in
/// [`Metric::ALL`]'s order, which is the enum's. A label set is kept once and shared by its
/// samples (a certificate's ~15).
pub(super) struct Samples {
    /// The label sets; the first is the empty one.
    pub(super) labels: Vec<String>,
    pub(super) families: [Vec<(usize, f64)>; Metric::ALL.len()],
}

impl Default for Samples {
    fn default() -> Self {
        Self {
            labels: vec![String::new()],
            families: std::array::from_fn(|_| Vec::new()),
        }
    }
}

impl Samples {
    /// A label set for [`put`](Self::put).
    pub(super) fn label(&mut self, labels: String) -> usize {
        self.labels.push(labels);
        self.labels.len() - 1
    }

    pub(super) fn put(&mut self, family: Metric, label: usize, value: f64) {
        self.families[family as usize].push((label, value));
    }

    /// A sample with a label set of its own.
    pub(super) fn add(&mut self, family: Metric, labels: &str, value: f64) {
        let label = if labels.is_empty() {
            0
        } else {
            self.label(labels.to_owned())
        };
        self.put(family, label, value);
    }

    /// The text exposition: each family with samples, in [`Metric::ALL`]'s order.
    pub(super) fn text(&self) -> String {
        let size: usize = Metric::ALL
            .into_iter()
            .zip(&self.families)
            .flat_map(|(family, samples)| {
                let name = family.def().0.len();
                samples
                    .iter()
                    .map(move |(l, _)| name + self.labels[*l].len() + 24)
            })
            .sum();
        let mut out = String::with_capacity(size + 8192);
        for (family, samples) in Metric::ALL.into_iter().zip(&self.families) {
            if samples.is_empty() {
                continue;
            }
            let (name, help) = family.def();
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            for (label, value) in samples {
                out.push_str(name);
                let labels = &self.labels[*label];
                if !labels.is_empty() {
                    out.push('{');
                    out.push_str(labels);
                    out.push('}');
                }
                out.push(' ');
                push_value(&mut out, *value);
                out.push('\n');
            }
        }
        out
    }
}

/// `value` as the text format writes it: a whole number (the timestamps, counts and flags) as
/// an integer, anything else as Rust prints an `f64` (both as `{value}` would).
pub(super) fn push_value(out: &mut String, value: f64) {
    // Whole numbers below 2^53 are exact as integers; -0 prints as "-0".
    if value.fract() == 0.0 && value.abs() < 9.0e15 && !(value == 0.0 && value.is_sign_negative()) {
        let _ = write!(out, "{}", value as i64);
    } else {
        let _ = write!(out, "{value}");
    }
}

pub(super) fn unix(t: OffsetDateTime) -> f64 {
    t.unix_timestamp() as f64
}

/// A label value in the text format: backslash, double quote and newline escaped.
pub(super) fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
