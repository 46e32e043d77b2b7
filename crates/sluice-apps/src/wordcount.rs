//! WordCount, the TurboStream paper's topology, built from library parts: a source of
//! sentences, a flat-map splitting each into words, a rolling count keyed by word, and a table
//! sink keeping the latest count of every word.
//!
//! ```text
//! sentences --forward--> split --key-by(word)--> sum (xN) --forward--> counts
//! ```
//!
//! `split` keeps no state, so it declares itself replicable (round robin):
//! `sluice plan wordcount --optimize replication` may give it more instances, and the counts
//! stay exact because `sum` is keyed by word whichever instance split a line.
//!
//! With `--input FILE` the source reads the file line by line, one sentence a line, and the
//! job ends at the end of the file. Without it the source generates sentences from a fixed
//! vocabulary at `--rate` sentences per second until `--duration` ends (or, with
//! `--set sentences=N`, after N sentences). End-to-end latency comes from the runtime's
//! sampled latency markers.
//!
//! The sizes `--set` takes are bounded ([`MAX_PARALLELISM`], [`MAX_WORDS_PER_SENTENCE`],
//! [`MAX_VOCABULARY`]); a value beyond is refused with its bounds rather than allocated.
//!
//! Words ([`sluice_ops::text::words`]): split on whitespace, lowercased, leading and trailing
//! ASCII punctuation stripped, empty words dropped. Output (`--output FILE`): `word<TAB>count`
//! lines sorted by word.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use sluice_graph::{OperatorError, Output, Partitioning, Produced, Snapshot, Source};
use sluice_ops::{text, Dataflow, Pacer, TableSink, TypedSource};
use sluice_types::CompactString;

use crate::random::XorShift;
use crate::{latency_line, throughput_line, App, AppConfig, AppError, AppSpec, NamedPlan};

/// The registry entry.
pub const SPEC: AppSpec = AppSpec {
    name: "wordcount",
    about: "counts words of a text file (--input) or of generated sentences (TurboStream topology)",
    settings: &[
        (
            "parallelism",
            "instances of the keyed sum operator (1 to 1024, default 1)",
        ),
        ("words", "words per generated sentence (1 to 65536, default 10)"),
        (
            "vocabulary",
            "distinct words the generator draws from (1 to 16777216, default 1000)",
        ),
        ("seed", "seed of the sentence generator (default 1)"),
        (
            "sentences",
            "generate this many sentences, then end (default: until --duration)",
        ),
    ],
    build,
    plans: &[
        NamedPlan {
            name: "two-threads",
            about: "a pipeline over two cores: sentences and split on one pinned thread, the count and the sink on the other",
            toml: TWO_THREADS,
            settings: &[],
        },
        NamedPlan {
            name: "two-processes",
            about: "the same pipeline as two processes joined by shared memory",
            toml: TWO_PROCESSES,
            settings: &[],
        },
    ],
};

/// WordCount's best plan on two cores: tokenizing and counting cost about the same, so the
/// source and the split share one core and the count and the table sink the other, joined by
/// one threaded port.
const TWO_THREADS: &str = r#"
[[thread]]
name = "tokenize"
operators = ["sentences", "split"]
core = 0

[[thread]]
name = "count"
operators = ["sum", "counts"]
core = 1
"#;

/// [`TWO_THREADS`] as two PEs, joined by shared memory.
const TWO_PROCESSES: &str = r#"
[[thread]]
name = "tokenize"
pe = "tokenize"
operators = ["sentences", "split"]
core = 0

[[thread]]
name = "count"
pe = "count"
operators = ["sum", "counts"]
core = 1
"#;

/// What the source generates or reads.
#[derive(Debug, Clone)]
struct Input {
    file: Option<PathBuf>,
    rate: Option<u64>,
    words_per_sentence: usize,
    vocabulary: usize,
    seed: u64,
    sentences: Option<u64>,
}

/// The most instances of the count (`--set parallelism`): each is a thread, or a process
/// under `--plan processes`, and a `tcp` receiver takes at most 1024 senders.
pub const MAX_PARALLELISM: usize = 1024;
/// The most words of a generated sentence (`--set words`): one sentence is one string.
pub const MAX_WORDS_PER_SENTENCE: usize = 1 << 16;
/// The most distinct words the generator draws from (`--set vocabulary`), all made up front:
/// 16 Mi words, a few hundred MiB.
pub const MAX_VOCABULARY: usize = 1 << 24;

fn build(config: &AppConfig) -> Result<App, AppError> {
    let settings = &config.settings;
    let parallelism = settings.get_in("parallelism", 1, 1..=MAX_PARALLELISM)?;
    let input = Input {
        file: config.input.clone(),
        rate: config.rate.filter(|r| *r > 0),
        words_per_sentence: settings.get_in("words", 10, 1..=MAX_WORDS_PER_SENTENCE)?,
        vocabulary: settings.get_in("vocabulary", 1000, 1..=MAX_VOCABULARY)?,
        seed: settings.get("seed", 1)?,
        sentences: settings
            .get("sentences", 0u64)
            .map(|n| (n > 0).then_some(n))?,
    };
    // A file has an end of its own, which `sluice run` knows; generated sentences have one
    // with `--set sentences`.
    let generated_sentences = input.sentences.filter(|_| input.file.is_none());
    if let Some(path) = &input.file {
        File::open(path).map_err(|e| AppError::File {
            path: path.display().to_string(),
            reason: format!("cannot read input: {e}"),
        })?;
    }
    if let Some(output) = &config.output {
        check_writable(output)?;
    }
    let output = config.output.clone();

    let flow = Dataflow::new("wordcount");
    flow.source("sentences", move |_| SentenceSource::new(input.clone()))
        .flat_map_into("split", |line: &String, words| {
            words.extend(text::words(line))
        })
        // Stateless: any instance splits any line, and the count after it is keyed by word,
        // so a replication optimizer may deal the lines round robin over more instances.
        .replicable(Partitioning::RoundRobin)
        .key_by(|word: &CompactString| word)
        .count("sum")
        .parallelism(parallelism)
        .sink("counts", move |_| {
            TableSink::<CompactString, u64>::new(output.clone())
        });
    Ok(App::new(
        flow.build()?,
        Box::new(|report| {
            [
                throughput_line("sentences", report.tuples_out("sentences"), report.elapsed),
                throughput_line("words", report.tuples_in("sum"), report.elapsed),
                format!(
                    "distinct words: {}",
                    report
                        .operator_report("counts")
                        .counters
                        .get("distinct_keys")
                        .copied()
                        .unwrap_or(0)
                ),
                latency_line(report.latency().as_ref()),
            ]
            .join("\n")
        }),
    )
    .with_finite_input("sentences", generated_sentences, "sentences"))
}

pub(crate) fn check_writable(path: &Path) -> Result<(), AppError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(AppError::File {
            path: path.display().to_string(),
            reason: format!(
                "cannot write output: directory {} does not exist",
                dir.display()
            ),
        });
    }
    if path.is_dir() {
        return Err(AppError::File {
            path: path.display().to_string(),
            reason: "cannot write output: it is a directory".into(),
        });
    }
    Ok(())
}

/// Sentences per `produce` call at most.
const SENTENCES_PER_CALL: usize = 128;

/// Reads sentences from a file, or generates them.
struct SentenceSource {
    input: Input,
    reader: Option<BufReader<File>>,
    generator: SentenceGenerator,
    pacer: Pacer,
    emitted: u64,
    batch: Vec<String>,
    /// Where in the input file to go on reading, when it resumes.
    resume_at: Option<u64>,
}

impl SentenceSource {
    fn new(input: Input) -> Self {
        Self {
            reader: None,
            generator: SentenceGenerator::new(
                input.words_per_sentence,
                input.vocabulary,
                input.seed,
            ),
            pacer: Pacer::new(input.rate),
            emitted: 0,
            batch: Vec::with_capacity(SENTENCES_PER_CALL),
            resume_at: None,
            input,
        }
    }

    /// The next sentence, or `None` at the end of the input.
    fn next_sentence(&mut self) -> Result<Option<String>, OperatorError> {
        let Some(reader) = &mut self.reader else {
            // Those of the batch being made count too, so a call ends exactly at the N-th.
            let made = self.emitted + self.batch.len() as u64;
            let done = self.input.sentences.is_some_and(|n| made >= n);
            return Ok((!done).then(|| self.generator.sentence()));
        };
        let mut line = String::new();
        let read = reader.read_line(&mut line).map_err(|e| {
            let path = self.input.file.as_deref().unwrap_or(Path::new("input"));
            OperatorError::io(format!("read {}", path.display()), e)
        })?;
        Ok((read > 0).then_some(line))
    }
}

impl TypedSource for SentenceSource {
    type Out = String;
}

impl Source for SentenceSource {
    fn start(&mut self, _: &sluice_graph::OperatorContext) -> Result<(), OperatorError> {
        if let Some(path) = &self.input.file {
            let file = File::open(path)
                .map_err(|e| OperatorError::io(format!("open {}", path.display()), e))?;
            let mut reader = BufReader::new(file);
            if let Some(offset) = self.resume_at {
                reader
                    .seek(SeekFrom::Start(offset))
                    .map_err(|e| OperatorError::io(format!("seek in {}", path.display()), e))?;
            }
            self.reader = Some(reader);
        }
        Ok(())
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let allowed = self.pacer.allowance(SENTENCES_PER_CALL);
        if allowed == 0 {
            return Ok(Produced::Idle);
        }
        for _ in 0..allowed {
            match self.next_sentence()? {
                Some(sentence) => self.batch.push(sentence),
                None => break,
            }
        }
        let emitted = self.batch.len();
        if emitted == 0 {
            return Ok(Produced::Exhausted);
        }
        self.emitted += emitted as u64;
        self.pacer.emitted(emitted);
        out.emit_batch(0, &mut self.batch)?;
        Ok(Produced::Emitted(emitted))
    }

    fn resumable(&self) -> bool {
        true
    }

    /// Sentences emitted, the generator's state and the offset in the input file.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        let offset = match &mut self.reader {
            Some(reader) => Some(
                reader
                    .stream_position()
                    .map_err(|e| OperatorError::io("find the position in the input", e))?,
            ),
            None => None,
        };
        Snapshot::whole(&(self.emitted, self.generator.random.state(), offset))
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        let (emitted, random, offset): (u64, u64, Option<u64>) = snapshot.decode_whole()?;
        self.emitted = emitted;
        self.generator.random = XorShift::new(random);
        self.resume_at = offset;
        Ok(())
    }
}

/// Deterministic sentences over a synthetic vocabulary (xorshift64*): the input of the
/// generated WordCount, and of the hand-written programs `sluice bench app wordcount`
/// measures beside it.
pub struct SentenceGenerator {
    vocabulary: Vec<String>,
    words_per_sentence: usize,
    /// Bytes of the longest sentence, so each is allocated once at its full size.
    longest: usize,
    random: XorShift,
}

impl SentenceGenerator {
    /// Sentences of `words_per_sentence` words drawn uniformly from `vocabulary` distinct
    /// words, in an order fixed by `seed`.
    pub fn new(words_per_sentence: usize, vocabulary: usize, seed: u64) -> Self {
        const SYLLABLES: [&str; 16] = [
            "ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "va", "ze", "bo", "du", "fi", "ga",
            "he", "ju",
        ];
        let vocabulary = (0..vocabulary)
            .map(|mut i| {
                let mut word = String::new();
                loop {
                    word.push_str(SYLLABLES[i % 16]);
                    i /= 16;
                    if i == 0 {
                        break word;
                    }
                }
            })
            .collect::<Vec<String>>();
        let longest_word = vocabulary.iter().map(String::len).max().unwrap_or(0);
        Self {
            vocabulary,
            words_per_sentence,
            longest: words_per_sentence * (longest_word + 1),
            random: XorShift::new(seed),
        }
    }

    /// The next sentence: words separated by single spaces.
    pub fn sentence(&mut self) -> String {
        let mut text = String::with_capacity(self.longest);
        for i in 0..self.words_per_sentence {
            if i > 0 {
                text.push(' ');
            }
            let pick = (self.random.next() % self.vocabulary.len() as u64) as usize;
            text.push_str(&self.vocabulary[pick]);
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_deterministic() {
        let mut a = SentenceGenerator::new(5, 100, 7);
        let mut b = SentenceGenerator::new(5, 100, 7);
        assert_eq!(a.sentence(), b.sentence());
        assert_eq!(a.sentence().split(' ').count(), 5);
    }
}
