//! Exactly-once output through checkpoints, at the operator level: each file sink is driven
//! through its hooks in the order the runtime calls them (start, process, checkpoint(n),
//! checkpoint_complete(n), finish), crashed (the instance dropped without `finish`) and
//! recovered as the runtime recovers (a new instance given the state of the last complete
//! checkpoint, then the tuples after it again); its output file must equal that of a run
//! without a fault and without checkpoints, byte for byte, and no part file may remain.

#[path = "../../sluice-ops/tests/common/mod.rs"]
mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use sluice_connectors::{ByteTarget, CsvFormat, CsvSink, StreamSink, TableSink};
use sluice_graph::{Operator, OperatorContext, OperatorError, Output, Snapshot};
use sluice_ops::{ExactlyOnce, TransactionalSink};
use sluice_types::{normal_tuple, CompactString, Tuple, TupleRef};

use common::NoOutputs;
use Step::*;

/// A CSV record, with a header row made from its field names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Row {
    id: u64,
    word: String,
}
normal_tuple!(Row);

/// One thing the runtime does to the sink instance.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    /// The tuples of these positions of the input arrive.
    Process(Range<u64>),
    /// Checkpoint n's barriers reach the instance.
    Checkpoint(u64),
    /// Every instance's part of checkpoint n is stored: n is complete (the job recovers from
    /// it from now on), though the instance has not been told yet.
    Stored(u64),
    /// The instance is told that checkpoint n is complete.
    Notify(u64),
    /// The end of the input: `finish`, then `stop`.
    Finish,
    /// The instance dies (dropped without `finish`) and a new one takes its place: given the
    /// state of the last complete checkpoint, if there is one, before `start`.
    Crash,
    /// What a sink that publishes as it goes has published is the output of the first this
    /// many tuples.
    Visible(u64),
}

/// How a sink under test is made, fed and read.
struct SinkUnderTest<T> {
    /// A new instance writing to the path.
    make: fn(&Path) -> Box<dyn Operator>,
    /// The tuple at a position of the input.
    tuple: fn(u64) -> T,
    /// What was published at the path, and the names of anything else left there.
    read: fn(&Path) -> (Vec<u8>, Vec<String>),
    /// It publishes as it goes (not only at the end).
    streams: bool,
}

/// The bytes of the file at `path` (none if it is missing); nothing else in its directory.
fn file_output(path: &Path) -> (Vec<u8>, Vec<String>) {
    let others = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name != path.file_name().unwrap())
        .map(|name| name.to_string_lossy().into_owned())
        .collect();
    (std::fs::read(path).unwrap_or_default(), others)
}

/// The tuples of the tests: words repeating, so that the table sink's keys are updated.
fn word(i: u64) -> String {
    format!("w{}-{}", i % 7, i / 3)
}

fn lines_sink() -> SinkUnderTest<u64> {
    SinkUnderTest {
        make: |path| Box::new(StreamSink::<u64, _>::lines(ByteTarget::file(path))),
        tuple: |i| i * 1_000_003,
        read: file_output,
        streams: true,
    }
}

fn frames_sink() -> SinkUnderTest<String> {
    SinkUnderTest {
        make: |path| Box::new(StreamSink::<String, _>::frames(ByteTarget::file(path))),
        tuple: word,
        read: file_output,
        streams: true,
    }
}

fn csv_sink() -> SinkUnderTest<Row> {
    SinkUnderTest {
        make: |path| {
            Box::new(CsvSink::<Row>::csv(
                ByteTarget::file(path),
                CsvFormat::default(),
            ))
        },
        tuple: |id| Row { id, word: word(id) },
        read: file_output,
        streams: true,
    }
}

fn table_sink() -> SinkUnderTest<(CompactString, u64)> {
    SinkUnderTest {
        make: |path| {
            Box::new(TableSink::<CompactString, u64>::new(Some(
                path.to_path_buf(),
            )))
        },
        tuple: |i| (CompactString::from(word(i)), i),
        read: file_output,
        streams: false,
    }
}

impl<T: Tuple> SinkUnderTest<T> {
    /// Runs `steps` into a new file in a new directory; returns the file's bytes and every
    /// other name left in the directory.
    fn run(&self, steps: &[Step]) -> (Vec<u8>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let ctx = OperatorContext {
            name: "sink".into(),
            instance: 0,
            parallelism: 1,
        };
        let mut no_outputs = NoOutputs;
        let mut out = Output::new(&[], &mut no_outputs);
        // The state and input position of each checkpoint taken, and the last complete.
        let mut taken: BTreeMap<u64, (Snapshot, u64)> = BTreeMap::new();
        let mut complete: Option<u64> = None;
        let mut position = 0;
        let mut sink = (self.make)(&path);
        sink.start(&ctx).unwrap();
        for step in steps {
            match step {
                Step::Process(range) => {
                    assert_eq!(range.start, position, "the input goes on where it was");
                    for i in range.clone() {
                        let tuple = (self.tuple)(i);
                        sink.process(0, TupleRef::new(&tuple), &mut out).unwrap();
                    }
                    position = range.end;
                }
                Step::Checkpoint(n) => {
                    let state = sink.checkpoint(*n).unwrap().make().unwrap();
                    taken.insert(*n, (state, position));
                }
                Step::Stored(n) => complete = Some(*n),
                Step::Notify(n) => sink.checkpoint_complete(*n).unwrap(),
                Step::Finish => {
                    sink.finish(&mut out).unwrap();
                    sink.stop().unwrap();
                }
                Step::Crash => {
                    drop(sink);
                    sink = (self.make)(&path);
                    position = 0;
                    if let Some(n) = complete {
                        let (state, at) = taken[&n].clone();
                        sink.restore(state).unwrap();
                        position = at;
                    }
                    sink.start(&ctx).unwrap();
                }
                Step::Visible(tuples) if self.streams => {
                    let (expected, _) = self.run(&[Process(0..*tuples), Finish]);
                    assert_eq!(
                        String::from_utf8_lossy(&(self.read)(&path).0),
                        String::from_utf8_lossy(&expected),
                        "at {step:?} of {steps:?}"
                    );
                }
                Step::Visible(_) => {}
            }
        }
        (self.read)(&path)
    }

    /// Asserts that `steps` leave the output of a run of `tuples` tuples without a fault and
    /// without checkpoints, and no other file.
    fn assert_fault_free(&self, tuples: u64, steps: &[Step]) {
        let (expected, _) = self.run(&[Step::Process(0..tuples), Step::Finish]);
        let (output, others) = self.run(steps);
        assert_eq!(
            String::from_utf8_lossy(&output),
            String::from_utf8_lossy(&expected),
            "after {steps:?}"
        );
        assert_eq!(output, expected);
        assert!(others.is_empty(), "left behind: {others:?}");
    }
}

/// A user's transactional sink: each transaction a file of lines in a directory, staged as
/// `.txn-N` when closed and renamed to `part-N` (N zero-padded, so that the names sort in
/// the order of the transactions) when committed.
struct DirectorySink {
    dir: PathBuf,
    /// The open transaction's file, `.open`, made at its first tuple.
    open: Option<File>,
}

/// A closed transaction: its number, and whether it has a file (it had tuples).
#[derive(Serialize, Deserialize)]
struct Staged {
    transaction: u64,
    written: bool,
}

impl DirectorySink {
    fn staged(&self, transaction: u64) -> PathBuf {
        self.dir.join(format!(".txn-{transaction}"))
    }

    fn part(&self, transaction: u64) -> PathBuf {
        self.dir.join(format!("part-{transaction:020}"))
    }
}

/// The error for an I/O failure in the directory sink.
fn io_error(e: std::io::Error) -> OperatorError {
    OperatorError::io("directory sink", e)
}

impl TransactionalSink for DirectorySink {
    type Tuple = u64;
    type Pending = Staged;

    fn start(
        &mut self,
        _ctx: &OperatorContext,
        recovered: Option<u64>,
    ) -> Result<(), OperatorError> {
        std::fs::create_dir_all(&self.dir).map_err(io_error)?;
        // What a failed attempt did after the checkpoint recovered from goes.
        for entry in std::fs::read_dir(&self.dir).map_err(io_error)? {
            let entry = entry.map_err(io_error)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let number = name
                .strip_prefix(".txn-")
                .or_else(|| name.strip_prefix("part-"))
                .map(|n| n.parse::<u64>().unwrap());
            if name == ".open" || number.is_some_and(|n| recovered.is_none_or(|r| n > r)) {
                std::fs::remove_file(entry.path()).map_err(io_error)?;
            }
        }
        Ok(())
    }

    fn write(&mut self, tuple: &u64) -> Result<(), OperatorError> {
        if self.open.is_none() {
            self.open = Some(File::create(self.dir.join(".open")).map_err(io_error)?);
        }
        let open = self.open.as_mut().expect("opened above");
        writeln!(open, "{tuple}").map_err(io_error)
    }

    fn pre_commit(&mut self, transaction: u64) -> Result<Staged, OperatorError> {
        let written = self.open.is_some();
        if let Some(open) = self.open.take() {
            open.sync_all().map_err(io_error)?;
            std::fs::rename(self.dir.join(".open"), self.staged(transaction)).map_err(io_error)?;
        }
        Ok(Staged {
            transaction,
            written,
        })
    }

    fn commit(&mut self, pending: Staged) -> Result<(), OperatorError> {
        let (staged, part) = (
            self.staged(pending.transaction),
            self.part(pending.transaction),
        );
        if !pending.written || (!staged.exists() && part.exists()) {
            return Ok(());
        }
        std::fs::rename(staged, part).map_err(io_error)
    }

    fn abort(&mut self, pending: Staged) -> Result<(), OperatorError> {
        match std::fs::remove_file(self.staged(pending.transaction)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_error(e)),
            _ => Ok(()),
        }
    }
}

/// The committed transactions of a [`DirectorySink`] at `dir`, in order, and anything else
/// left in it.
fn directory_output(dir: &Path) -> (Vec<u8>, Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (Vec::new(), Vec::new());
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let (parts, others): (Vec<String>, Vec<String>) = names
        .into_iter()
        .partition(|name| name.starts_with("part-"));
    let committed = parts
        .iter()
        .flat_map(|part| std::fs::read(dir.join(part)).unwrap())
        .collect();
    (committed, others)
}

fn directory_sink() -> SinkUnderTest<u64> {
    SinkUnderTest {
        make: |dir| {
            Box::new(ExactlyOnce::new(DirectorySink {
                dir: dir.to_path_buf(),
                open: None,
            }))
        },
        tuple: |i| i * 7,
        read: directory_output,
        streams: true,
    }
}

/// Runs `check` for every file sink and a user's transactional sink.
fn for_every_sink(check: impl Fn(&dyn Fn(u64, &[Step]))) {
    check(&|tuples, steps| lines_sink().assert_fault_free(tuples, steps));
    check(&|tuples, steps| frames_sink().assert_fault_free(tuples, steps));
    check(&|tuples, steps| csv_sink().assert_fault_free(tuples, steps));
    check(&|tuples, steps| table_sink().assert_fault_free(tuples, steps));
    check(&|tuples, steps| directory_sink().assert_fault_free(tuples, steps));
}

#[test]
fn a_crash_after_a_completed_checkpoint_recovers_from_it() {
    for_every_sink(|check| {
        check(
            40,
            &[
                Process(0..10),
                Checkpoint(1),
                Process(10..13),
                Stored(1),
                Notify(1),
                Visible(10),
                Process(13..20),
                Checkpoint(2),
                Process(20..25),
                Crash,
                Visible(10),
                Process(10..40),
                Finish,
            ],
        )
    });
}

#[test]
fn a_crash_before_the_second_checkpoint_completes_recovers_from_the_first() {
    for_every_sink(|check| {
        check(
            40,
            &[
                Process(0..10),
                Checkpoint(1),
                Stored(1),
                Notify(1),
                Process(10..20),
                Checkpoint(2),
                Process(20..22),
                Crash,
                Process(10..40),
                Finish,
            ],
        )
    });
}

#[test]
fn a_checkpoint_stored_but_not_told_is_published_by_the_recovery() {
    for_every_sink(|check| {
        check(
            30,
            &[
                Process(0..10),
                Checkpoint(1),
                Process(10..15),
                Checkpoint(2),
                Stored(2),
                Visible(0),
                Crash,
                Visible(15),
                Process(15..30),
                Finish,
            ],
        )
    });
}

#[test]
fn a_crash_after_the_end_of_the_input_publishes_nothing_twice() {
    for_every_sink(|check| {
        check(
            30,
            &[
                Process(0..10),
                Checkpoint(1),
                Stored(1),
                Notify(1),
                Process(10..20),
                Checkpoint(2),
                Stored(2),
                Notify(2),
                Process(20..30),
                Finish,
                Visible(30),
                Crash,
                Visible(20),
                Process(20..30),
                Finish,
            ],
        )
    });
}

#[test]
fn a_checkpoint_after_the_end_of_the_input_keeps_everything() {
    for_every_sink(|check| {
        check(
            20,
            &[
                Process(0..10),
                Checkpoint(1),
                Stored(1),
                Notify(1),
                Process(10..20),
                Finish,
                Checkpoint(2),
                Stored(2),
                Crash,
                Visible(20),
                Finish,
            ],
        )
    });
}

#[test]
fn a_crash_before_any_checkpoint_completed_starts_afresh() {
    for_every_sink(|check| {
        check(
            30,
            &[
                Process(0..10),
                Checkpoint(1),
                Process(10..20),
                Checkpoint(2),
                Crash,
                Process(0..30),
                Finish,
            ],
        )
    });
}

#[test]
fn a_crash_while_recovering_recovers_again() {
    for_every_sink(|check| {
        check(
            50,
            &[
                Process(0..10),
                Checkpoint(1),
                Stored(1),
                Process(10..20),
                Checkpoint(2),
                Process(20..30),
                Crash,
                Process(10..15),
                Checkpoint(3),
                Stored(3),
                Notify(3),
                Process(15..35),
                Finish,
                Crash,
                Process(15..50),
                Finish,
            ],
        )
    });
}

/// The steps the runtime takes over `tuples` tuples, a checkpoint every `every` tuples,
/// each stored `lag` tuples after it is taken and told right after, when the instance dies
/// at the steps numbered in `crashes` (counted over the whole run).
fn schedule(tuples: u64, every: u64, lag: u64, crashes: &[usize]) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut next = 1;
    // The input position of the last stored checkpoint.
    let mut resume_at = 0;
    loop {
        // Checkpoints taken and not yet stored: (number, input position, when it is stored).
        let mut waiting: Vec<(u64, u64, u64)> = Vec::new();
        // Takes a step; says whether the instance died after it.
        let push = |steps: &mut Vec<Step>, step: Step| {
            steps.push(step);
            let crashed = crashes.contains(&steps.len());
            if crashed {
                steps.push(Crash);
            }
            crashed
        };
        let mut position = resume_at;
        'attempt: {
            while position < tuples {
                let end = (position - position % every + every).min(tuples);
                if push(&mut steps, Process(position..end)) {
                    break 'attempt;
                }
                position = end;
                while let Some(&(n, at, due)) = waiting.first() {
                    if due > position {
                        break;
                    }
                    waiting.remove(0);
                    resume_at = at;
                    if push(&mut steps, Stored(n)) || push(&mut steps, Notify(n)) {
                        break 'attempt;
                    }
                }
                if position % every == 0 && position < tuples {
                    waiting.push((next, position, position + lag));
                    next += 1;
                    if push(&mut steps, Checkpoint(next - 1)) {
                        break 'attempt;
                    }
                }
            }
            if push(&mut steps, Finish) {
                break 'attempt;
            }
            return steps;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Whatever the checkpoints' spacing and lag and wherever the instance dies, each file
    /// sink's output equals that of a run without a fault.
    #[test]
    fn any_crashes_leave_the_fault_free_output(
        tuples in 1u64..60,
        every in 1u64..12,
        lag in 0u64..8,
        crashes in proptest::collection::vec(1usize..40, 0..4),
        sink in 0usize..5,
    ) {
        let steps = schedule(tuples, every, lag, &crashes);
        match sink {
            0 => lines_sink().assert_fault_free(tuples, &steps),
            1 => frames_sink().assert_fault_free(tuples, &steps),
            2 => csv_sink().assert_fault_free(tuples, &steps),
            3 => table_sink().assert_fault_free(tuples, &steps),
            _ => directory_sink().assert_fault_free(tuples, &steps),
        }
    }
}

#[test]
fn a_recovery_into_an_output_replaced_since_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.txt");
    let ctx = OperatorContext {
        name: "sink".into(),
        instance: 0,
        parallelism: 1,
    };
    let mut no_outputs = NoOutputs;
    let mut out = Output::new(&[], &mut no_outputs);
    let mut sink = StreamSink::<u64, _>::lines(ByteTarget::file(&path));
    sink.start(&ctx).unwrap();
    sink.process(0, TupleRef::new(&1u64), &mut out).unwrap();
    sink.checkpoint(1).unwrap();
    sink.checkpoint_complete(1).unwrap();
    sink.process(0, TupleRef::new(&2u64), &mut out).unwrap();
    let state = sink.checkpoint(2).unwrap().make().unwrap();
    drop(sink);
    // Someone else's file takes the output's place (the output kept aside, so that its
    // inode number is not given to the new file).
    std::fs::rename(&path, dir.path().join("aside.txt")).unwrap();
    std::fs::write(&path, "theirs\n").unwrap();
    let mut sink = StreamSink::<u64, _>::lines(ByteTarget::file(&path));
    sink.restore(state).unwrap();
    let error = sink.start(&ctx).unwrap_err().to_string();
    assert!(
        error.contains(&format!("recover {}", path.display()))
            && error.contains("no longer the file this job published its first 2 bytes into"),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "theirs\n");
}
