//! VWAP's sink: with `--output FILE` it writes each bargain as a line (the library's
//! [`StreamSink`], lines as [`Bargain`]'s `Display` makes them, in the order they arrive, which
//! differs between plans: sort by the first column, the quote's position in the feed, to
//! compare); without, it only receives them (the job's report counts them).

use sluice_graph::{Operator, OperatorContext, OperatorError, OperatorReport, Output};
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

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        self.lines
            .as_mut()
            .map_or_else(|| Ok(OperatorReport::default()), |s| s.stop())
    }
}
