//! The suite's records: one JSON object per measurement, the schema of `sluice bench --json`
//! plus where and when it was measured, appended to `results.jsonl` as each measurement ends.
//!
//! Every record has `experiment`, `run_index` (its place in the run, from 0), `machine` (CPU
//! model, cores, kernel, memory), `commit` and `skipped`; a skipped one has a `reason`. A
//! Sluice measurement carries the fields of [`BenchResult`](crate::foundation::report::BenchResult), a peer's
//! `"peer": NAME`, the hardware's those of [`HardwareResult`](crate::transports::hardware::HardwareResult).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;
use serde_json::{json, Value};

use super::Experiment;
use crate::foundation::args::{Bench, Settings};
use crate::foundation::machine;

/// The name of the results file in the output directory.
pub(crate) const RESULTS: &str = "results.jsonl";

/// `results.jsonl`, written a line at a time and flushed after each.
pub(crate) struct ResultsFile(BufWriter<File>);

impl ResultsFile {
    /// Creates (or truncates) `path`.
    pub(crate) fn create(path: &Path) -> anyhow::Result<Self> {
        let file = File::create(path).with_context(|| format!("create {}", path.display()))?;
        Ok(Self(BufWriter::new(file)))
    }

    /// Appends `record` as one line.
    pub(crate) fn append(&mut self, record: &Value) -> anyhow::Result<()> {
        serde_json::to_writer(&mut self.0, record)?;
        self.0.write_all(b"\n")?;
        self.0.flush()?;
        Ok(())
    }
}

/// Reads the records of a `results.jsonl`.
pub(crate) fn read_records(path: &Path) -> anyhow::Result<Vec<Value>> {
    let file = File::open(path).with_context(|| format!("open {}", path.display()))?;
    let mut records = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("read {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let record = serde_json::from_str(&line)
            .with_context(|| format!("{}:{}: not a JSON object", path.display(), i + 1))?;
        records.push(record);
    }
    Ok(records)
}

/// The machine a run measured.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Machine {
    /// The CPU model.
    pub(crate) cpu: String,
    /// Cores available to the process.
    pub(crate) cores: usize,
    /// The kernel release.
    pub(crate) kernel: String,
    /// Memory in GiB.
    pub(crate) memory_gib: f64,
}

impl Machine {
    /// This machine.
    pub(crate) fn here() -> Self {
        let read = |path| std::fs::read_to_string(path).unwrap_or_default();
        Self {
            cpu: machine::cpu(),
            cores: machine::cores(),
            kernel: Some(read("/proc/sys/kernel/osrelease").trim().to_string())
                .filter(|k| !k.is_empty())
                .unwrap_or_else(|| "unknown".into()),
            memory_gib: memory_gib(&read("/proc/meminfo")).unwrap_or(0.0),
        }
    }
}

/// The `MemTotal` of a `/proc/meminfo` text, in GiB.
fn memory_gib(meminfo: &str) -> Option<f64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some((kib / (1 << 20) as f64 * 10.0).round() / 10.0)
}

/// `value` as JSON (plain structs of numbers and strings always serialize).
pub(crate) fn to_value(value: &impl Serialize) -> Value {
    serde_json::to_value(value)
        .unwrap_or_else(|e| json!({ "skipped": true, "reason": e.to_string() }))
}

/// Adds the fields every record has.
pub(crate) fn stamp(record: &mut Value, machine: &Machine, index: usize, experiment: Experiment) {
    if let Value::Object(fields) = record {
        fields.insert("experiment".into(), json!(experiment.name()));
        fields.insert("run_index".into(), json!(index));
        fields.insert("machine".into(), to_value(machine));
        fields.insert("commit".into(), json!(machine::commit()));
        fields.entry("cpu").or_insert_with(|| json!(machine.cpu));
        fields
            .entry("cores")
            .or_insert_with(|| json!(machine.cores));
        fields.entry("skipped").or_insert(json!(false));
    }
}

/// The record of a Sluice measurement that failed: its settings and why.
pub(crate) fn skipped_sluice(s: &Settings, reason: &str) -> Value {
    let (bench, rate) = match s.bench {
        Bench::Throughput => ("throughput", None),
        Bench::Latency { rate } => ("latency", Some(rate)),
    };
    json!({
        "bench": bench,
        "transport": s.transport,
        "encoding": s.encoding,
        "tuple_size": s.size,
        "target_rate": rate,
        "receivers": s.receivers,
        "skipped": true,
        "reason": reason,
    })
}

/// Warnings the records carry in all (their `warnings` lists).
pub(crate) fn warnings(records: &[Value]) -> usize {
    records
        .iter()
        .filter_map(|r| r.get("warnings")?.as_array().map(Vec::len))
        .sum()
}

/// Whether a record was skipped.
pub(crate) fn is_skipped(record: &Value) -> bool {
    record["skipped"].as_bool().unwrap_or(false)
}

/// `bench-results/<date>-<commit>` under the working directory.
pub(crate) fn default_dir() -> PathBuf {
    let days = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 86_400);
    let (y, m, d) = civil_date(days as i64);
    PathBuf::from("bench-results").join(format!("{y:04}-{m:02}-{d:02}-{}", machine::commit()))
}

/// The proleptic Gregorian date `days` after 1970-01-01 (the usual era arithmetic: 400-year
/// eras of 146,097 days, years starting in March so the leap day comes last).
fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_from_days() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(59), (1970, 3, 1));
        assert_eq!(civil_date(11_016), (2000, 2, 29));
        assert_eq!(civil_date(19_723), (2024, 1, 1));
        assert_eq!(civil_date(20_513), (2026, 3, 1));
        assert_eq!(civil_date(-1), (1969, 12, 31));
    }

    #[test]
    fn memory_from_meminfo() {
        assert_eq!(
            memory_gib("MemFree: 1 kB\nMemTotal:       25165824 kB\n"),
            Some(24.0)
        );
        assert_eq!(memory_gib("nothing"), None);
    }

    #[test]
    fn records_round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RESULTS);
        let mut file = ResultsFile::create(&path).unwrap();
        let machine = Machine::here();
        let mut record = json!({"bench": "throughput"});
        stamp(&mut record, &machine, 3, Experiment::Throughput);
        file.append(&record).unwrap();
        file.append(&json!({"skipped": true, "reason": "x"}))
            .unwrap();
        drop(file);
        let back = read_records(&path).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0]["run_index"], 3);
        assert_eq!(back[0]["experiment"], "throughput");
        assert_eq!(back[0]["skipped"], false);
        assert!(back[0]["machine"]["cores"].as_u64().unwrap() >= 1);
        assert!(is_skipped(&back[1]));
        std::fs::write(&path, "{\"a\":1}\nnot json\n").unwrap();
        let err = read_records(&path).unwrap_err().to_string();
        assert!(err.ends_with(":2: not a JSON object"), "{err}");
    }
}
