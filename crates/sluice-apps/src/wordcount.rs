//! WordCount, the TurboStream paper's topology: a source of sentences, a split operator that
//! emits each word, and a sum operator keyed by word that keeps running counts; a sink
//! records end-to-end latency and writes the final counts.
//!
//! ```text
//! sentences --forward--> split --key-by(word)--> sum (xN) --forward--> counts
//! ```
//!
//! With `--input FILE` the source reads the file line by line, one sentence a line, and the
//! job ends at the end of the file. Without it the source generates sentences from a fixed
//! vocabulary at `--rate` sentences per second until `--duration` ends. Every tuple carries
//! the time its sentence was emitted, so the sink measures latency from source to sink.
//!
//! Words: split on whitespace, lowercased, leading and trailing ASCII punctuation stripped,
//! empty words dropped. Output (`--output FILE`): `word<TAB>count` lines sorted by word.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sluice_graph::{
    expect_tuple, latency_histogram, GraphBuilder, LatencyHistogram, Operator, OperatorError,
    OperatorReport, Output, Partitioning, Ports, Produced, Source,
};
use sluice_ops::{FlatMap, Pacer};
use sluice_types::{monotonic_ns, normal_tuple, TupleRef};

use crate::{latency_line, throughput_line, App, AppConfig, AppError, AppSpec};

/// The registry entry.
pub const SPEC: AppSpec = AppSpec {
    name: "wordcount",
    about: "counts words of a text file (--input) or of generated sentences (TurboStream topology)",
    settings: &[
        (
            "parallelism",
            "instances of the keyed sum operator (default 1)",
        ),
        ("words", "words per generated sentence (default 10)"),
        (
            "vocabulary",
            "distinct words the generator draws from (default 1000)",
        ),
        ("seed", "seed of the sentence generator (default 1)"),
    ],
    build,
};

/// A line of text and when it entered the job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sentence {
    /// The text.
    pub text: String,
    /// `monotonic_ns` at emission.
    pub emitted_ns: u64,
}

/// One word of a sentence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Word {
    /// The normalised word.
    pub word: String,
    /// The sentence's emission time.
    pub emitted_ns: u64,
}

/// A word's running count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WordCount {
    /// The word.
    pub word: String,
    /// How many times it has been seen so far.
    pub count: u64,
    /// The emission time of the sentence that brought it here.
    pub emitted_ns: u64,
}

normal_tuple!(Sentence, Word, WordCount);

/// The words of `text`: split on whitespace, lowercased, ASCII punctuation trimmed from both
/// ends, empty words dropped.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| c.is_ascii_punctuation()))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

fn build(config: &AppConfig) -> Result<App, AppError> {
    let parallelism: usize = config.settings.get("parallelism", 1)?;
    let words_per_sentence: usize = config.settings.get("words", 10)?;
    let vocabulary: usize = config.settings.get("vocabulary", 1000)?;
    let seed: u64 = config.settings.get("seed", 1)?;
    for (key, value) in [
        ("parallelism", parallelism),
        ("words", words_per_sentence),
        ("vocabulary", vocabulary),
    ] {
        if value == 0 {
            return Err(AppError::BadSetting {
                key: key.into(),
                reason: "must be at least 1".into(),
            });
        }
    }
    if let Some(input) = &config.input {
        File::open(input).map_err(|e| AppError::File {
            path: input.display().to_string(),
            reason: format!("cannot read input: {e}"),
        })?;
    }
    if let Some(output) = &config.output {
        check_writable(output)?;
    }

    let mut g = GraphBuilder::new("wordcount");
    let input = config.input.clone();
    let rate = config.rate.filter(|r| *r > 0);
    let source = g.source("sentences", Ports::new().output::<Sentence>(), move |_| {
        SentenceSource::new(input.clone(), rate, words_per_sentence, vocabulary, seed)
    });
    let split = g.operator(
        "split",
        Ports::new().input::<Sentence>().output::<Word>(),
        |_| {
            FlatMap::new(|s: &Sentence| {
                let emitted_ns = s.emitted_ns;
                words(&s.text)
                    .map(move |word| Word { word, emitted_ns })
                    .collect::<Vec<_>>()
            })
        },
    );
    let sum = g.operator(
        "sum",
        Ports::new().input::<Word>().output::<WordCount>(),
        |_| Sum::default(),
    );
    let output = config.output.clone();
    let sink = g.operator("counts", Ports::new().input::<WordCount>(), move |_| {
        CountSink::new(output.clone())
    });
    g.set_parallelism(sum, parallelism)?;
    g.connect(source.out(0), split.input(0))?;
    g.connect_with(
        split.out(0),
        sum.input(0),
        Partitioning::key_by(|w: &Word| w.word.clone()),
    )?;
    g.connect(sum.out(0), sink.input(0))?;
    Ok(App {
        graph: g.build()?,
        summarize: Box::new(|report| {
            [
                throughput_line("sentences", report.tuples_out("sentences"), report.elapsed),
                throughput_line("words", report.tuples_in("sum"), report.elapsed),
                format!(
                    "distinct words: {}",
                    report
                        .operator_report("counts")
                        .counters
                        .get("distinct_words")
                        .copied()
                        .unwrap_or(0)
                ),
                latency_line(report.latency().as_ref()),
            ]
            .join("\n")
        }),
    })
}

fn check_writable(path: &Path) -> Result<(), AppError> {
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

/// Lines per `produce` call when reading a file.
const LINES_PER_CALL: usize = 128;

/// Reads sentences from a file, or generates them.
struct SentenceSource {
    input: Option<PathBuf>,
    reader: Option<BufReader<File>>,
    generator: SentenceGenerator,
    pacer: Pacer,
}

impl SentenceSource {
    fn new(
        input: Option<PathBuf>,
        rate: Option<u64>,
        words_per_sentence: usize,
        vocabulary: usize,
        seed: u64,
    ) -> Self {
        Self {
            input,
            reader: None,
            generator: SentenceGenerator::new(words_per_sentence, vocabulary, seed),
            pacer: Pacer::new(rate),
        }
    }
}

impl Source for SentenceSource {
    fn start(&mut self, _: &sluice_graph::OperatorContext) -> Result<(), OperatorError> {
        if let Some(path) = &self.input {
            let file = File::open(path)
                .map_err(|e| OperatorError::io(format!("open {}", path.display()), e))?;
            self.reader = Some(BufReader::new(file));
        }
        Ok(())
    }

    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let allowed = self.pacer.allowance(LINES_PER_CALL);
        if allowed == 0 {
            return Ok(Produced::Idle);
        }
        for _ in 0..allowed {
            let text = match &mut self.reader {
                Some(reader) => {
                    let mut line = String::new();
                    let read = reader.read_line(&mut line).map_err(|e| {
                        let path = self.input.as_deref().unwrap_or(Path::new("input"));
                        OperatorError::io(format!("read {}", path.display()), e)
                    })?;
                    if read == 0 {
                        return Ok(Produced::Exhausted);
                    }
                    line
                }
                None => self.generator.sentence(),
            };
            out.emit(
                0,
                Sentence {
                    text,
                    emitted_ns: monotonic_ns(),
                },
            )?;
            self.pacer.emitted(1);
        }
        Ok(Produced::Emitted(allowed))
    }
}

/// Deterministic sentences over a synthetic vocabulary (xorshift64*): the input of the
/// generated WordCount, and of the hand-written programs `sluice bench app wordcount`
/// measures beside it.
pub struct SentenceGenerator {
    vocabulary: Vec<String>,
    words_per_sentence: usize,
    state: u64,
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
            .collect();
        Self {
            vocabulary,
            words_per_sentence,
            state: seed.max(1),
        }
    }

    fn next(&mut self) -> u64 {
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        self.state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The next sentence: words separated by single spaces.
    pub fn sentence(&mut self) -> String {
        let mut text = String::new();
        for i in 0..self.words_per_sentence {
            if i > 0 {
                text.push(' ');
            }
            let pick = (self.next() % self.vocabulary.len() as u64) as usize;
            text.push_str(&self.vocabulary[pick]);
        }
        text
    }
}

/// Running counts per word; emits the new count for every word it sees.
#[derive(Default)]
struct Sum {
    counts: HashMap<String, u64>,
}

impl Operator for Sum {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let w = expect_tuple::<Word>(port, tuple)?;
        let count = match self.counts.get_mut(&w.word) {
            Some(c) => {
                *c += 1;
                *c
            }
            None => {
                self.counts.insert(w.word.clone(), 1);
                1
            }
        };
        out.emit(
            0,
            WordCount {
                word: w.word.clone(),
                count,
                emitted_ns: w.emitted_ns,
            },
        )
    }
}

/// Keeps the latest count of every word and the latency of every update; writes the counts
/// when the stream ends.
struct CountSink {
    output: Option<PathBuf>,
    counts: HashMap<String, u64>,
    latency: LatencyHistogram,
}

impl CountSink {
    fn new(output: Option<PathBuf>) -> Self {
        Self {
            output,
            counts: HashMap::new(),
            latency: latency_histogram(),
        }
    }
}

impl Operator for CountSink {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let c = expect_tuple::<WordCount>(port, tuple)?;
        self.latency
            .saturating_record(monotonic_ns().saturating_sub(c.emitted_ns));
        let latest = self.counts.entry(c.word.clone()).or_insert(0);
        *latest = (*latest).max(c.count);
        Ok(())
    }

    fn finish(&mut self, _out: &mut Output<'_>) -> Result<(), OperatorError> {
        let Some(path) = &self.output else {
            return Ok(());
        };
        let write = || -> std::io::Result<()> {
            let mut sorted: Vec<(&String, &u64)> = self.counts.iter().collect();
            sorted.sort();
            let mut w = BufWriter::new(File::create(path)?);
            for (word, count) in sorted {
                writeln!(w, "{word}\t{count}")?;
            }
            w.flush()
        };
        write().map_err(|e| OperatorError::io(format!("write {}", path.display()), e))
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        let mut report = OperatorReport::default();
        report
            .counters
            .insert("distinct_words".into(), self.counts.len() as u64);
        report.latency = Some(std::mem::replace(&mut self.latency, latency_histogram()));
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_normalised() {
        let w: Vec<String> = words("  Hello, WORLD!  it's \"quoted\" -- ... e-mail\t(x)").collect();
        assert_eq!(w, vec!["hello", "world", "it's", "quoted", "e-mail", "x"]);
    }

    #[test]
    fn generator_is_deterministic() {
        let mut a = SentenceGenerator::new(5, 100, 7);
        let mut b = SentenceGenerator::new(5, 100, 7);
        assert_eq!(a.sentence(), b.sentence());
        assert_eq!(a.sentence().split(' ').count(), 5);
    }
}
