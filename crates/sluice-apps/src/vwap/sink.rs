//! VWAP's sink: with `--output FILE` it writes each bargain as a line (the library's
//! [`StreamSink`], lines as [`Bargain`]'s `Display` makes them, in the order they arrive, which
//! differs between plans: sort by the first column, the quote's position in the feed, to
//! compare); without, it only receives them (the job's report counts them). Its state, its
//! checkpoints and their completion are the [`StreamSink`]'s, so the file is exactly once
//! through a recovery from a checkpoint.

use sluice_graph::{
    CheckpointState, Operator, OperatorContext, OperatorError, OperatorReport, Output, Snapshot,
};
use sluice_ops::framing::{DisplayLine, LineEncoder};
use sluice_ops::{ByteTarget, StreamSink};
use sluice_types::{BatchRef, TupleRef};

use crate::vwap::feed::Bargain;

/// Writes bargains to a file, or drops them.
pub struct BargainSink {
    lines: Option<StreamSink<Bargain, LineEncoder<DisplayLine<Bargain>>>>,
}

impl BargainSink {
    /// Writing to `output` if given.
    pub fn new(output: Option<&std::path::Path>) -> Self {
        Self {
            lines: output.map(|path| StreamSink::lines(ByteTarget::file(path))),
        }
    }
}

/// The lines of a bargains file the sink wrote, in feed order: sorted by their first column,
/// the quote's position in the feed (a line without one first).
pub fn in_feed_order(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort_by_key(|l| l.split('\t').next().and_then(|seq| seq.parse::<u64>().ok()));
    lines
}

impl Operator for BargainSink {
    fn start(&mut self, ctx: &OperatorContext) -> Result<(), OperatorError> {
        self.lines.as_mut().map_or(Ok(()), |s| s.start(ctx))
    }

    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.lines
            .as_mut()
            .map_or(Ok(()), |s| s.process(port, tuple, out))
    }

    fn process_batch(
        &mut self,
        port: usize,
        batch: BatchRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        self.lines
            .as_mut()
            .map_or(Ok(()), |s| s.process_batch(port, batch, out))
    }

    fn finish(&mut self, out: &mut Output<'_>) -> Result<(), OperatorError> {
        self.lines.as_mut().map_or(Ok(()), |s| s.finish(out))
    }

    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        self.lines
            .as_mut()
            .map_or(Ok(Snapshot::default()), |s| s.snapshot())
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        match &mut self.lines {
            Some(lines) => lines.restore(snapshot),
            None => Ok(()),
        }
    }

    /// The file is published with checkpoints: exactly once through a recovery.
    fn checkpoint(&mut self, checkpoint: u64) -> Result<CheckpointState, OperatorError> {
        self.lines
            .as_mut()
            .map_or(Ok(Snapshot::default().into()), |s| s.checkpoint(checkpoint))
    }

    fn checkpoint_complete(&mut self, checkpoint: u64) -> Result<(), OperatorError> {
        self.lines
            .as_mut()
            .map_or(Ok(()), |s| s.checkpoint_complete(checkpoint))
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        self.lines
            .as_mut()
            .map_or_else(|| Ok(OperatorReport::default()), |s| s.stop())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytemuck::Zeroable;
    use sluice_graph::{OutputSink, OwnedTuple, Timer};

    /// A sink has no output port to emit on.
    struct NoOutputs;

    impl OutputSink for NoOutputs {
        fn emit(&mut self, port: usize, _: &mut dyn OwnedTuple) -> Result<(), OperatorError> {
            Err(OperatorError::NoSuchPort { port, count: 0 })
        }
        fn punctuate(&mut self, port: usize) -> Result<(), OperatorError> {
            Err(OperatorError::NoSuchPort { port, count: 0 })
        }
        fn watermark(&mut self, _: u64) -> Result<(), OperatorError> {
            Ok(())
        }
        fn set_timer(&mut self, _: Timer) {}
    }

    #[test]
    fn a_completed_checkpoint_publishes_the_bargains_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bargains.txt");
        let mut sink = BargainSink::new(Some(&path));
        let ctx = OperatorContext {
            name: "bargains".into(),
            instance: 0,
            parallelism: 1,
        };
        sink.start(&ctx).unwrap();
        let mut no_outputs = NoOutputs;
        let mut out = Output::new(&[], &mut no_outputs);
        let bargain = Bargain {
            seq: 42,
            ..Bargain::zeroed()
        };
        sink.process(0, TupleRef::new(&bargain), &mut out).unwrap();
        assert!(!sink.checkpoint(1).unwrap().make().unwrap().is_empty());
        sink.checkpoint_complete(1).unwrap();
        let published = std::fs::read_to_string(&path).unwrap();
        assert_eq!(in_feed_order(&published), [bargain.to_string()]);
    }
}
