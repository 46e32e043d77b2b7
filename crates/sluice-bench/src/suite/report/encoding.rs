//! The encoding section: facade tuples (read in place) against normal tuples (serialized) of the same size on each transport (IBM Table 3).

use super::{ratio, times, Section, Table};
use crate::suite::rows::{Row, ORDER};

pub(super) fn encoding_section(rows: &[Row]) -> Section {
    let mut t = Table::new(
        "Facade against normal tuples (IBM Table 3)",
        "Throughput in Gbit/s of fixed-size facade tuples (read in place) and normal tuples (a serialized byte vector) of the same size.",
        &["transport", "tuple bytes", "facade Gbit/s", "normal Gbit/s", "normal / facade"],
    );
    for tr in ORDER {
        for n in rows
            .iter()
            .filter(|r| r.is("encoding") && r.transport() == tr && r.normal())
        {
            let facade = rows.iter().find(|f| {
                f.is("throughput") && f.transport() == tr && f.size() == n.size() && !f.normal()
            });
            let f_gbit = facade.and_then(|f| f.gbit_per_sec);
            let n_gbit = n.gbit_per_sec.unwrap_or(0.0);
            t.rows.push(vec![
                tr.to_string(),
                n.size().to_string(),
                f_gbit.map_or("-".into(), |g| format!("{g:.3}")),
                format!("{n_gbit:.3}"),
                times(f_gbit.and_then(|f| ratio(n_gbit, f))),
            ]);
        }
    }
    Section {
        title: "Encoding",
        tables: vec![t],
        plots: vec![],
    }
}
