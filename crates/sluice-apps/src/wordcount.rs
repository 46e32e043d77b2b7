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
//! job ends at the end of the file. Any other address resolves through the connectors'
//! registry (`sluice_connectors::registry`) to a source of lines: `tcp://HOST:PORT`,
//! `udp://HOST:PORT`, or `kafka://HOST:PORT/TOPIC`, whose records are read as UTF-8 lines from
//! the earliest up to the end offsets the topic had when the job started (a bounded read, as
//! of a file). `--output FILE` writes the table of counts at the end; any other address
//! (`stdout`, `tcp://`, `udp://`, `kafka://`) gets every count as it changes, a line
//! `word<TAB>count` (a Kafka record keyed by the word, at least once, or exactly once with
//! `--set delivery=exactly-once`); a Kafka input is read at most `--rate` records a second if
//! given. Writing lines other
//! than to Kafka adds an operator (`format`, before the sink) that the named plans do not
//! place: use them with a file, generated sentences or Kafka as the output. Without an input the
//! source generates sentences from a fixed
//! vocabulary at `--rate` sentences per second until `--duration` ends (or, with
//! `--set sentences=N`, after N sentences). End-to-end latency comes from the runtime's
//! sampled latency markers.
//!
//! The sizes `--set` takes are bounded ([`MAX_PARALLELISM`], [`MAX_WORDS_PER_SENTENCE`],
//! [`MAX_VOCABULARY`]); a value beyond is refused with its bounds rather than allocated. So is
//! a line of the input ([`MAX_LINE_BYTES`]); a line that is not UTF-8 is refused with its line
//! number and the offset of its first bad byte.
//!
//! Words ([`sluice_ops::text::words`]): split on whitespace, lowercased, leading and trailing
//! ASCII punctuation stripped, empty words dropped. Output (`--output FILE`): `word<TAB>count`
//! lines sorted by word.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use sluice_connectors::{
    kafka, registry, Connector, Csv, Delivery, EndAt, FlowIo, KafkaRecord, Lines, StreamIo,
    TableSink, Target,
};
use sluice_graph::{DeclaredCost, OperatorError, Output, Partitioning, Produced, Snapshot, Source};
use sluice_ops::{text, Dataflow, Pacer, TypedSource};
use sluice_transport::MAX_TUPLE_BYTES;
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
        (
            "word-bytes",
            "pads each generated word with 'x' to at least this many bytes (1 to 4096, default 1: \
             none): larger keys for the same vocabulary",
        ),
        ("seed", "seed of the sentence generator (default 1)"),
        (
            "sentences",
            "generate this many sentences, then end (default: until --duration)",
        ),
        (
            "delivery",
            "the guarantee of a kafka:// --output: at-least-once (default) or exactly-once (one Kafka transaction per checkpoint; read it with isolation.level=read_committed)",
        ),
        (
            "kafka-follow",
            "a kafka:// --input: false (default) reads up to the end offsets the topic had at the start; true reads new records as they come, until --duration ends",
        ),
        (
            "kafka.*",
            "a librdkafka setting for a kafka:// --input or --output (kafka.KEY=VALUE)",
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

/// What a word costs each operator, declared for `--plan auto`, from callgrind's instructions
/// a word (docs/benchmarks.md, issue 30: about 305 for generating and splitting, 190 for the
/// rolling count, 164 for the table sink, 658 fused) at fused's 10 M words/s on this project's
/// two-core reference machine (about 0.15 ns an instruction): 100 ns a word in all, so one
/// core carries `sluice run wordcount`'s default 1 M words/s at a tenth of its time.
const GENERATE_NS_PER_WORD: f64 = 20.0;
/// See [`GENERATE_NS_PER_WORD`].
const SPLIT_NS_PER_WORD: f64 = 26.0;
/// See [`GENERATE_NS_PER_WORD`].
const COUNT_NS_PER_WORD: f64 = 29.0;
/// See [`GENERATE_NS_PER_WORD`].
const TABLE_NS_PER_WORD: f64 = 25.0;

/// What the source generates or reads.
#[derive(Debug, Clone)]
struct Input {
    file: Option<PathBuf>,
    rate: Option<u64>,
    words_per_sentence: usize,
    vocabulary: usize,
    word_bytes: usize,
    seed: u64,
    sentences: Option<u64>,
}

/// The most instances of the count (`--set parallelism`): each is a thread, or a process
/// under `--plan processes`, and a `tcp` receiver takes at most 1024 senders.
pub const MAX_PARALLELISM: usize = 1024;
/// The most words of a generated sentence (`--set words`): one sentence is one string.
pub const MAX_WORDS_PER_SENTENCE: usize = 1 << 16;
/// The most distinct words the generator draws from (`--set vocabulary`): 16 Mi words (each
/// is made from its number as it is drawn; their counts are the count's state).
pub const MAX_VOCABULARY: usize = 1 << 24;
/// The most bytes a generated word is padded to (`--set word-bytes`).
pub const MAX_WORD_BYTES: usize = 4096;

fn build(config: &AppConfig) -> Result<App, AppError> {
    let settings = &config.settings;
    let parallelism = settings.get_in("parallelism", 1, 1..=MAX_PARALLELISM)?;
    let mut input = Input {
        file: None,
        rate: config.rate.filter(|r| *r > 0),
        words_per_sentence: settings.get_in("words", 10, 1..=MAX_WORDS_PER_SENTENCE)?,
        vocabulary: settings.get_in("vocabulary", 1000, 1..=MAX_VOCABULARY)?,
        word_bytes: settings.get_in("word-bytes", 1, 1..=MAX_WORD_BYTES)?,
        seed: settings.get("seed", 1)?,
        sentences: settings
            .get("sentences", 0u64)
            .map(|n| (n > 0).then_some(n))?,
    };
    // An address other than a file goes through the connectors' registry, as lines; a file
    // is read by the sentence source (its limits, its position) and written as the table.
    let connector_settings = settings.with_prefix("kafka.");
    let guarantee: Guarantee = settings.get("delivery", Guarantee::AtLeastOnce)?;
    let input_at = config
        .input
        .as_deref()
        .map(|path| address(path, &connector_settings))
        .transpose()?;
    let output_at = config
        .output
        .as_deref()
        .map(|path| address(path, &connector_settings))
        .transpose()?;
    input.file = match &input_at {
        Some(Address::File(path)) => Some(path.clone()),
        _ => None,
    };
    if let Some(path) = &input.file {
        File::open(path).map_err(|e| AppError::File {
            path: path.display().to_string(),
            reason: format!("cannot read input: {e}"),
        })?;
    }
    let output = match &output_at {
        Some(Address::File(path)) => Some(path.clone()),
        _ => None,
    };
    if output.is_some() {
        config.check_output()?;
    }
    // A file has an end of its own, which `sluice run` knows; generated sentences have one
    // with `--set sentences`.
    let generated_sentences = input.sentences.filter(|_| input_at.is_none());
    let is_kafka = |at: &Option<Address<'_>>| matches!(at, Some(Address::Connector(connector, _)) if connector.scheme == "kafka");
    let (kafka_in, kafka_out) = (is_kafka(&input_at), is_kafka(&output_at));

    // A sentence's cost is its words'.
    let words_per_sentence = input.words_per_sentence as f64;
    let per_word = |ns: f64, outputs_per_input: f64| DeclaredCost {
        ns_per_tuple: ns * words_per_sentence,
        outputs_per_input,
    };
    let flow = Dataflow::new("wordcount");
    // Kafka is read and written typed, one operator each, so that the named plans place
    // every operator; other connectors go through the registry's lines.
    let words = match &input_at {
        Some(Address::Connector(connector, target)) if connector.scheme == "kafka" => {
            let mut kafka = registry::kafka_source_config(target)?;
            // `--rate`: sentences per second, as of generated ones.
            kafka.max_rate = input.rate;
            if settings.get("kafka-follow", false)? {
                kafka.end = EndAt::Unbounded;
            }
            flow.read_kafka("sentences", kafka, Lines)
                .flat_map_into("split", |record: &KafkaRecord<String>, words| {
                    words.extend(text::words(&record.value))
                })
        }
        Some(Address::Connector(connector, target)) => connector
            .read_lines(&flow, "sentences", target)?
            .flat_map_into("split", |line: &String, words| {
                words.extend(text::words(line))
            }),
        _ => flow
            .source("sentences", move |_| SentenceSource::new(input.clone()))
            .cost(per_word(GENERATE_NS_PER_WORD, 1.0))
            .flat_map_into("split", |line: &String, words| {
                words.extend(text::words(line))
            }),
    }
    .cost(per_word(SPLIT_NS_PER_WORD, words_per_sentence));
    let counts = words
        // Stateless: any instance splits any line, and the count after it is keyed by word,
        // so a replication optimizer may deal the lines round robin over more instances.
        .replicable(Partitioning::RoundRobin)
        .key_by(|word: &CompactString| word)
        .count("sum")
        .parallelism(parallelism)
        .cost(DeclaredCost {
            ns_per_tuple: COUNT_NS_PER_WORD,
            outputs_per_input: 1.0,
        });
    match &output_at {
        // Every count as it changes, a `word<TAB>count` line (keyed by the word where the
        // connector keys records): a reader keeps each word's last line.
        Some(Address::Connector(connector, target)) if connector.scheme == "kafka" => {
            let mut kafka = registry::kafka_sink_config(target)?;
            if guarantee == Guarantee::ExactlyOnce {
                kafka.delivery = Delivery::ExactlyOnce {
                    transactional_id: format!("sluice-wordcount-{}", kafka.topic),
                };
            }
            counts.write_kafka(
                "counts",
                kafka,
                Csv::new(b'\t'),
                |(word, _): &(CompactString, u64)| Some(word.as_bytes().to_vec()),
            );
        }
        Some(Address::Connector(connector, target)) => {
            let lines = counts.map("format", |(word, count): &(CompactString, u64)| {
                format!("{word}\t{count}")
            });
            connector.write_lines(&lines, "counts", target)?;
        }
        _ => {
            counts
                .sink("counts", move |_| {
                    TableSink::<CompactString, u64>::new(output.clone())
                })
                .cost(DeclaredCost {
                    ns_per_tuple: TABLE_NS_PER_WORD,
                    outputs_per_input: 0.0,
                });
        }
    }
    Ok(App::new(
        flow.build()?,
        Box::new(move |report| {
            let kafka = [
                kafka_in
                    .then(|| kafka::source_summary(&report.operator_report("sentences").counters)),
                kafka_out.then(|| kafka::sink_summary(&report.operator_report("counts").counters)),
            ];
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
            .into_iter()
            .chain(kafka.into_iter().flatten())
            .collect::<Vec<_>>()
            .join("\n")
        }),
    )
    .with_finite_input("sentences", generated_sentences, "sentences"))
}

/// The guarantee of a `kafka://` output (`--set delivery=at-least-once|exactly-once`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Guarantee {
    AtLeastOnce,
    ExactlyOnce,
}

impl std::str::FromStr for Guarantee {
    type Err = &'static str;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "at-least-once" => Ok(Self::AtLeastOnce),
            "exactly-once" => Ok(Self::ExactlyOnce),
            _ => Err("the delivery is at-least-once or exactly-once"),
        }
    }
}

/// Where an `--input` or `--output` address points.
enum Address<'a> {
    /// A file (a path that is not UTF-8 is one).
    File(PathBuf),
    /// Another connector of the registry, and its target.
    Connector(&'static Connector, Target<'a>),
}

/// Where `path`, an `--input` or `--output` address, points.
fn address<'a>(path: &'a Path, settings: &'a [(String, String)]) -> Result<Address<'a>, AppError> {
    let Some(text) = path.to_str() else {
        return Ok(Address::File(path.to_path_buf()));
    };
    let (connector, target) = registry::resolve(text, settings)?;
    Ok(match connector.file_path(&target) {
        Some(file) => Address::File(file),
        None => Address::Connector(connector, target),
    })
}

/// Sentences per `produce` call at most.
const SENTENCES_PER_CALL: usize = 128;

/// The longest line of an `--input` file, its line end included: a line is one sentence, one
/// tuple, and a tuple's encoding is at most [`MAX_TUPLE_BYTES`] (1 GiB). A longer line (a
/// file without line ends, `/dev/zero`) fails the job with its line number and offset rather
/// than filling memory.
pub const MAX_LINE_BYTES: usize = MAX_TUPLE_BYTES;

/// The lines of an `--input` file, each checked for its length and for UTF-8, with where
/// they are for the errors.
struct InputLines {
    reader: BufReader<File>,
    path: PathBuf,
    /// The number of the next line, from 1.
    line: u64,
    /// The byte offset of the next line in the file.
    offset: u64,
}

impl InputLines {
    /// Opens `path`, at the start or at `(offset, line)` where a suspended source left it.
    fn open(path: &Path, resume: Option<(u64, u64)>) -> Result<Self, OperatorError> {
        let file = File::open(path)
            .map_err(|e| OperatorError::io(format!("open {}", path.display()), e))?;
        let mut reader = BufReader::new(file);
        let (offset, line) = resume.unwrap_or((0, 1));
        if offset > 0 {
            reader
                .seek(SeekFrom::Start(offset))
                .map_err(|e| OperatorError::io(format!("seek in {}", path.display()), e))?;
        }
        Ok(Self {
            reader,
            path: path.to_path_buf(),
            line,
            offset,
        })
    }

    /// The next line with its line end, or `None` at the end of the file.
    fn next_line(&mut self) -> Result<Option<String>, OperatorError> {
        let (path, line, offset) = (self.path.display(), self.line, self.offset);
        let mut bytes = Vec::new();
        let limit = MAX_LINE_BYTES as u64 + 1;
        let read = Read::by_ref(&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut bytes)
            .map_err(|e| OperatorError::io(format!("read {path} at line {line}"), e))?;
        if read == 0 {
            return Ok(None);
        }
        if bytes.len() > MAX_LINE_BYTES && bytes.last() != Some(&b'\n') {
            return Err(OperatorError::Failed(format!(
                "{path}: line {line} (from byte {offset}) is longer than {MAX_LINE_BYTES} bytes, \
                 the limit of a line (one tuple)"
            )));
        }
        self.line += 1;
        self.offset += read as u64;
        String::from_utf8(bytes).map(Some).map_err(|e| {
            let at = offset + e.utf8_error().valid_up_to() as u64;
            OperatorError::Failed(format!(
                "{path}: line {line} is not valid UTF-8 at byte offset {at} of the file (offset \
                 {} in the line)",
                at - offset
            ))
        })
    }
}

/// Reads sentences from a file, or generates them.
struct SentenceSource {
    input: Input,
    lines: Option<InputLines>,
    generator: SentenceGenerator,
    pacer: Pacer,
    emitted: u64,
    batch: Vec<String>,
    /// Where in the input file (the byte offset and the line number) to go on reading, when
    /// it resumes.
    resume_at: Option<(u64, u64)>,
}

impl SentenceSource {
    fn new(input: Input) -> Self {
        Self {
            lines: None,
            generator: SentenceGenerator::new(
                input.words_per_sentence,
                input.vocabulary,
                input.seed,
            )
            .with_word_bytes(input.word_bytes),
            pacer: Pacer::new(input.rate),
            emitted: 0,
            batch: Vec::with_capacity(SENTENCES_PER_CALL),
            resume_at: None,
            input,
        }
    }

    /// The next sentence, or `None` at the end of the input.
    fn next_sentence(&mut self) -> Result<Option<String>, OperatorError> {
        match &mut self.lines {
            Some(lines) => lines.next_line(),
            None => {
                // Those of the batch being made count too, so a call ends exactly at the N-th.
                let made = self.emitted + self.batch.len() as u64;
                let done = self.input.sentences.is_some_and(|n| made >= n);
                Ok((!done).then(|| self.generator.sentence()))
            }
        }
    }
}

impl TypedSource for SentenceSource {
    type Out = String;
}

impl Source for SentenceSource {
    fn start(&mut self, _: &sluice_graph::OperatorContext) -> Result<(), OperatorError> {
        if let Some(path) = &self.input.file {
            self.lines = Some(InputLines::open(path, self.resume_at)?);
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

    /// Sentences emitted, the generator's state and the offset and line number in the input
    /// file.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        let position = self.lines.as_ref().map(|l| (l.offset, l.line));
        Snapshot::whole(&(self.emitted, self.generator.random.state(), position))
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        let (emitted, random, offset): (u64, u64, Option<(u64, u64)>) = snapshot.decode_whole()?;
        self.emitted = emitted;
        self.generator.random = XorShift::new(random);
        self.resume_at = offset;
        Ok(())
    }
}

/// The syllables a generated word is made of: word `i` is `i`'s digits in base 16, lowest
/// first, each as its syllable.
const SYLLABLES: [&str; 16] = [
    "ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "va", "ze", "bo", "du", "fi", "ga", "he", "ju",
];

/// Appends word `i` of the vocabulary, padded with `x` to `pad` bytes, to `text`.
fn push_word(text: &mut String, mut i: u64, pad: usize) {
    let start = text.len();
    loop {
        text.push_str(SYLLABLES[(i % 16) as usize]);
        i /= 16;
        if i == 0 {
            break;
        }
    }
    while text.len() - start < pad {
        text.push('x');
    }
}

/// Deterministic sentences over a synthetic vocabulary (xorshift64*): the input of the
/// generated WordCount, and of the hand-written programs `sluice bench app wordcount`
/// measures beside it. Each word is made from its number as it is drawn, so a vocabulary of
/// millions of words costs nothing to start with (a restarted source begins at once).
pub struct SentenceGenerator {
    /// How many distinct words it draws from.
    vocabulary: u64,
    /// The bytes every word is padded to.
    word_bytes: usize,
    words_per_sentence: usize,
    /// Bytes of the longest sentence, so each is allocated once at its full size.
    longest: usize,
    random: XorShift,
}

impl SentenceGenerator {
    /// Sentences of `words_per_sentence` words drawn uniformly from `vocabulary` distinct
    /// words (at least one), in an order fixed by `seed`.
    pub fn new(words_per_sentence: usize, vocabulary: usize, seed: u64) -> Self {
        let mut generator = Self {
            vocabulary: vocabulary.max(1) as u64,
            word_bytes: 0,
            words_per_sentence,
            longest: 0,
            random: XorShift::new(seed),
        };
        generator.longest = generator.longest_sentence();
        generator
    }

    /// The same sentences with every word padded with `x` (a letter no word has) to at least
    /// `bytes` bytes: distinct words stay distinct, and each key of the count is larger.
    pub fn with_word_bytes(mut self, bytes: usize) -> Self {
        self.word_bytes = bytes;
        self.longest = self.longest_sentence();
        self
    }

    /// Bytes of the longest sentence with its spaces: the last word is the longest, having
    /// the most digits.
    fn longest_sentence(&self) -> usize {
        let mut longest = String::new();
        push_word(&mut longest, self.vocabulary - 1, self.word_bytes);
        self.words_per_sentence * (longest.len() + 1)
    }

    /// The next sentence: words separated by single spaces.
    pub fn sentence(&mut self) -> String {
        let mut text = String::with_capacity(self.longest);
        for i in 0..self.words_per_sentence {
            if i > 0 {
                text.push(' ');
            }
            let pick = self.random.next() % self.vocabulary;
            push_word(&mut text, pick, self.word_bytes);
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_words_stay_distinct_and_reach_their_length() {
        let words = |g: &mut SentenceGenerator| {
            (0..50)
                .flat_map(|_| {
                    g.sentence()
                        .split(' ')
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .collect::<Vec<String>>()
        };
        let plain = words(&mut SentenceGenerator::new(4, 300, 3));
        let padded = words(&mut SentenceGenerator::new(4, 300, 3).with_word_bytes(40));
        assert_eq!(plain.len(), padded.len());
        for (p, w) in plain.iter().zip(&padded) {
            assert_eq!(w.len(), 40, "{w}");
            assert_eq!(w.trim_end_matches('x'), p);
        }
    }

    /// Words made from their numbers as they are drawn are the words the generator once made
    /// up front for its whole vocabulary (these sentences are theirs, seeds 7 and 3): a
    /// recorded or compared output stays the same.
    #[test]
    fn sentences_are_those_of_the_vocabulary_made_up_front() {
        let mut g = SentenceGenerator::new(6, 2_100_000, 7);
        assert_eq!(
            g.sentence(),
            "hebomipeto hehenunupe mibomijubo hepetofidu loranuzetolo pedujunufilo"
        );
        assert_eq!(
            g.sentence(),
            "dusifibobolo pevajubo vanubohepelo vapelomipelo pejuzekafilo nubokatoju"
        );
        let mut padded = SentenceGenerator::new(3, 300, 3).with_word_bytes(12);
        assert_eq!(padded.sentence(), "nufixxxxxxxx nuloxxxxxxxx fifixxxxxxxx");
        assert_eq!(g.longest, 6 * (12 + 1));
        assert_eq!(padded.longest, 3 * (12 + 1));
    }

    #[test]
    fn generator_is_deterministic() {
        let mut a = SentenceGenerator::new(5, 100, 7);
        let mut b = SentenceGenerator::new(5, 100, 7);
        assert_eq!(a.sentence(), b.sentence());
        assert_eq!(a.sentence().split(' ').count(), 5);
    }
}
