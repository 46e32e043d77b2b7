//! The table sink: the latest value of every key of a stream of `(key, value)` pairs, written
//! to a file as `key<TAB>value` lines at the end of the stream (WordCount's `counts`).

use std::fmt::Display;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use sluice_graph::{
    expect_tuple, CheckpointState, Operator, OperatorContext, OperatorError, OperatorReport,
    Output, Snapshot,
};
use sluice_ops::{Key, KeyedState, Value};
use sluice_types::{BatchRef, Tuple, TupleRef};

use crate::output_file::OutputFile;

/// A sink keeping the latest value of every key from a stream of `(key, value)` pairs; at the
/// end of the stream it writes them, one `key<TAB>value` line each sorted by key, to a file if
/// it was given one. The file is an [`OutputFile`] made when the job starts, so a directory
/// that cannot be written fails the job before the stream is read, and the file appears only
/// whole. Its report counts the keys (`distinct_keys`).
///
/// Through checkpoints it is exactly once as it is: its checkpoint state is the table, and
/// the file is written whole at the end, so an instance recovered from a checkpoint (even
/// one that failed after writing the file, before the job ended) writes the same file again.
pub struct TableSink<K, V> {
    output: Option<PathBuf>,
    file: Option<OutputFile>,
    table: KeyedState<K, V>,
}

impl<K: Key, V: Value> TableSink<K, V> {
    /// A table written to `output` at the end, if given.
    pub fn new(output: Option<PathBuf>) -> Self {
        Self {
            output,
            file: None,
            table: KeyedState::new(),
        }
    }

    #[inline]
    fn put(&mut self, (key, value): &(K, V)) {
        self.table
            .update(key, || value.clone(), |latest| *latest = value.clone());
    }
}

impl<K, V> Operator for TableSink<K, V>
where
    K: Key + Ord + Display,
    V: Value + Display,
    (K, V): Tuple,
{
    fn start(&mut self, _ctx: &OperatorContext) -> Result<(), OperatorError> {
        if let Some(path) = &self.output {
            let file = OutputFile::create(path)
                .map_err(|e| OperatorError::io(format!("create {}", path.display()), e))?;
            self.file = Some(file);
        }
        Ok(())
    }

    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.put(expect_tuple::<(K, V)>(port, tuple)?);
        Ok(())
    }

    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        match batch.as_slice::<(K, V)>() {
            Some(pairs) => pairs.iter().for_each(|pair| self.put(pair)),
            None => {
                for tuple in batch.iter() {
                    self.put(expect_tuple::<(K, V)>(port, tuple)?);
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Output<'_>) -> Result<(), OperatorError> {
        let (Some(path), Some(file)) = (&self.output, self.file.take()) else {
            return Ok(());
        };
        let write = || -> std::io::Result<()> {
            let mut rows: Vec<(&K, &V)> = self.table.iter().collect();
            rows.sort_by(|a, b| a.0.cmp(b.0));
            let mut w = BufWriter::new(file);
            for (key, value) in rows {
                writeln!(w, "{key}\t{value}")?;
            }
            w.into_inner().map_err(|e| e.into_error())?.commit()
        };
        write().map_err(|e| OperatorError::io(format!("write {}", path.display()), e))
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let mut report = OperatorReport::default();
        report
            .counters
            .insert("distinct_keys".into(), self.table.len() as u64);
        Ok(report)
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Ok(Snapshot {
            operator: Vec::new(),
            keyed: self.table.snapshot()?,
        })
    }

    fn checkpoint(&mut self, _: u64) -> Result<CheckpointState, OperatorError> {
        Ok(CheckpointState::Later(self.table.snapshot_later()))
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.table.restore(&snapshot.keyed)
    }
}
