//! The pipelines section: the compression and encryption pipelines over several senders and receivers beside the serial program, with the speedup.

use super::{Section, Table};
use crate::suite::plots;
use crate::suite::rows::Row;

/// The pipelines' table: a row per pipeline and parallelism, its MB/s beside the serial
/// program's and the speedup.
pub(crate) fn pipeline_table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "Compression and encryption pipelines: speedup over the serial program",
        "A fixed input cut into packets, compressed (zlib level 6) or encrypted (AES-256-GCM) by the senders and checked byte for byte by the receivers, each sender and receiver a thread, parked when idle (`sluice bench pipeline`); the serial program does every packet on one thread in the same run. MB/s of input, decimal; speedup: the serial program's time over the pipeline's.",
        &[
            "pipeline",
            "senders",
            "receivers",
            "input MB",
            "packet bytes",
            "pipeline MB/s",
            "serial MB/s",
            "speedup",
        ],
    );
    for r in rows.iter().filter(|r| r.experiment == "pipeline") {
        let mut cells = vec![r.app.clone().unwrap_or_default()];
        if r.skipped {
            cells.push(format!("skipped: {}", r.reason.clone().unwrap_or_default()));
            cells.extend(["-"; 6].map(String::from));
        } else {
            let number =
                |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
            cells.extend([
                r.senders.map_or("-".into(), |n| n.to_string()),
                r.receivers.map_or("-".into(), |n| n.to_string()),
                number(r.size_bytes.map(|b| b as f64 / 1e6), 1),
                r.packet_bytes.map_or("-".into(), |n| n.to_string()),
                number(r.mb_per_sec, 1),
                number(r.serial_mb_per_sec, 1),
                number(r.speedup, 2),
            ]);
        }
        t.rows.push(cells);
    }
    t
}

pub(super) fn pipeline_section(rows: &[Row]) -> Section {
    Section {
        title: "Pipelines",
        tables: vec![pipeline_table(rows)],
        plots: vec![plots::PIPELINE],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::rows::rows;
    use serde_json::json;

    #[test]
    fn a_pipeline_stands_beside_the_serial_program_with_its_speedup() {
        let records = vec![
            json!({"experiment": "pipeline", "bench": "pipeline", "app": "compress",
                "senders": 2, "receivers": 2, "size_bytes": 67_108_864u64, "packet_bytes": 16384,
                "mb_per_sec": 80.0, "serial_mb_per_sec": 42.5, "speedup": 1.875}),
            json!({"experiment": "pipeline", "bench": "pipeline", "app": "encrypt",
                "skipped": true, "reason": "no core"}),
        ];
        let t = pipeline_table(&rows(&records));
        assert_eq!(
            t.rows[0],
            ["compress", "2", "2", "67.1", "16384", "80.0", "42.5", "1.88"]
        );
        assert_eq!(t.rows[1][1], "skipped: no core");
        assert_eq!(t.rows[1].len(), t.header.len());
    }
}
