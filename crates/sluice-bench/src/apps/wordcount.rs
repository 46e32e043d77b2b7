//! WordCount's yardsticks, each counting the words of the application's generated sentences in
//! one thread, generating each sentence in the same loop as it counts it:
//!
//! - `naive`: what a user writes without the library: the words split on whitespace, ASCII
//!   punctuation trimmed from both ends, empty ones dropped, each lowercased into a `String`
//!   and counted in a `std::collections::HashMap<String, u64>` (SipHash).
//! - `tuned`: the library's own data structures and tricks without the engine between them:
//!   the words from `sluice_ops::text::words` (a `CompactString` each, no allocation per
//!   word), and per word the two steps of the application's operators: the running count in a
//!   `KeyMap` (the keyed sum), then that count recorded as the word's latest in a second
//!   `KeyMap` (the sink's table). The application's ratio to it is the engine's own cost.

use std::collections::HashMap;

use sluice_apps::wordcount::SentenceGenerator;
use sluice_apps::Settings;
use sluice_types::{CompactString, KeyMap};

use crate::apps::entry::{Benchable, Yardstick, YardstickSpec};

/// The registry entry.
pub(crate) const BENCHABLE: Benchable = Benchable {
    name: "wordcount",
    input: "sentences",
    counted: "sum",
    unit: "words",
    input_rate: None,
    yardsticks: &[
        YardstickSpec {
            name: "naive",
            about: "split on whitespace, trim, lowercase into a String per word, count in a std HashMap<String, u64> (SipHash)",
            tunes: None,
            make: |settings| generated(settings, Naive::default()),
        },
        YardstickSpec {
            name: "tuned",
            about: "sluice_ops::text::words (CompactString, no allocation per word), the running count in a KeyMap, then the latest count in a second KeyMap, as the application's sum and sink do",
            tunes: Some("naive"),
            make: |settings| generated(settings, Tuned::default()),
        },
    ],
};

/// Counts the words of sentences, as one yardstick does.
trait Counter {
    /// Counts the words of `sentence`; returns how many it had.
    fn count(&mut self, sentence: &str) -> u64;
}

/// What a user writes without the library.
#[derive(Default)]
struct Naive {
    counts: HashMap<String, u64>,
}

impl Counter for Naive {
    fn count(&mut self, sentence: &str) -> u64 {
        let mut words = 0;
        for word in sentence.split_whitespace() {
            let word = word.trim_matches(|c: char| c.is_ascii_punctuation());
            if word.is_empty() {
                continue;
            }
            *self.counts.entry(word.to_lowercase()).or_insert(0) += 1;
            words += 1;
        }
        words
    }
}

/// The library's data structures, without the engine.
#[derive(Default)]
struct Tuned {
    /// The keyed sum's running counts.
    counts: KeyMap<CompactString, u64>,
    /// The sink's table: the latest count of every word.
    latest: KeyMap<CompactString, u64>,
}

impl Counter for Tuned {
    fn count(&mut self, sentence: &str) -> u64 {
        let mut words = 0;
        for word in sluice_ops::text::words(sentence) {
            let count = match self.counts.get_mut(&word) {
                Some(count) => {
                    *count += 1;
                    *count
                }
                None => {
                    self.counts.insert(word.clone(), 1);
                    1
                }
            };
            let latest = self.latest.entry(word).or_insert(0);
            *latest = (*latest).max(count);
            words += 1;
        }
        words
    }
}

/// A counter fed by the application's sentence generator.
struct Generated<C> {
    sentences: SentenceGenerator,
    counter: C,
}

impl<C: Counter> Yardstick for Generated<C> {
    fn steps(&mut self, n: usize) -> u64 {
        (0..n)
            .map(|_| {
                let sentence = self.sentences.sentence();
                self.counter.count(&sentence)
            })
            .sum()
    }
}

/// `counter` fed by the generator the application builds from its `--set` values.
fn generated<C: Counter + 'static>(
    settings: &Settings,
    counter: C,
) -> anyhow::Result<Box<dyn Yardstick>> {
    let sentences = generator(settings)?;
    Ok(Box::new(Generated { sentences, counter }))
}

/// The generator the application builds from its `--set` values (with the application's
/// defaults: 10 words a sentence from 1,000, seed 1).
fn generator(settings: &Settings) -> anyhow::Result<SentenceGenerator> {
    Ok(SentenceGenerator::new(
        settings.get("words", 10)?,
        settings.get("vocabulary", 1000)?,
        settings.get("seed", 1)?,
    ))
}

/// The count of every word of the first `sentences` sentences the application generates with
/// `settings`, counted in one thread: what its output holds once it counted them, however it
/// ran.
pub(crate) fn direct_counts(
    settings: &Settings,
    sentences: u64,
) -> anyhow::Result<HashMap<String, u64>> {
    let mut generator = generator(settings)?;
    let mut counter = Naive::default();
    for _ in 0..sentences {
        counter.count(&generator.sentence());
    }
    Ok(counter.counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_apps::AppConfig;
    use sluice_plan::{PlanOptions, PlanRequest};
    use sluice_runtime::RunOptions;

    /// `map` as `word<TAB>count` lines sorted by word, the application's output format.
    fn lines<'a>(map: impl IntoIterator<Item = (&'a str, &'a u64)>) -> Vec<String> {
        let mut lines: Vec<String> = map
            .into_iter()
            .map(|(word, count)| format!("{word}\t{count}"))
            .collect();
        lines.sort();
        lines
    }

    #[test]
    fn the_yardsticks_count_what_the_application_counts() {
        const SENTENCES: usize = 3_000;
        let mut generator = SentenceGenerator::new(10, 1000, 1);
        // Every third sentence capitalised and punctuated, as text from a file would be.
        let sentences: Vec<String> = (0..SENTENCES)
            .map(|i| {
                let s = generator.sentence();
                match i % 3 {
                    0 => format!("\"{}{}!\" -- ...", s[..1].to_uppercase(), &s[1..]),
                    _ => s,
                }
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("sentences.txt");
        let output = dir.path().join("counts.tsv");
        std::fs::write(&input, sentences.join("\n") + "\n").unwrap();
        let config = AppConfig {
            input: Some(input),
            output: Some(output.clone()),
            ..AppConfig::default()
        };
        let app = sluice_apps::build("wordcount", &config).unwrap();
        let plan =
            sluice_plan::plan(&app.graph, &PlanRequest::Fused, &PlanOptions::default()).unwrap();
        sluice_runtime::run(&app.graph, &plan, &RunOptions::default()).unwrap();
        let counted: Vec<String> = std::fs::read_to_string(&output)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert!(counted.len() > 900, "{} distinct words", counted.len());

        let (mut naive, mut tuned) = (Naive::default(), Tuned::default());
        for sentence in &sentences {
            assert_eq!(naive.count(sentence), 10, "{sentence}");
            assert_eq!(tuned.count(sentence), 10, "{sentence}");
        }
        let naive = lines(naive.counts.iter().map(|(w, c)| (w.as_str(), c)));
        assert_eq!(naive, counted);
        let latest = lines(tuned.latest.iter().map(|(w, c)| (w.as_str(), c)));
        assert_eq!(latest, counted);
        let running = lines(tuned.counts.iter().map(|(w, c)| (w.as_str(), c)));
        assert_eq!(running, counted);
    }

    #[test]
    fn a_yardstick_counts_the_sentences_the_application_generates() {
        let settings = Settings::parse(["words=4", "vocabulary=50", "seed=7"]).unwrap();
        let mut expected = Naive::default();
        let mut sentences = SentenceGenerator::new(4, 50, 7);
        for _ in 0..100 {
            expected.count(&sentences.sentence());
        }
        let mut yardstick = Generated {
            sentences: SentenceGenerator::new(4, 50, 7),
            counter: Naive::default(),
        };
        assert_eq!(yardstick.steps(100), 400);
        assert_eq!(yardstick.counter.counts, expected.counts);
        assert_eq!(direct_counts(&settings, 100).unwrap(), expected.counts);
        let mut made = (BENCHABLE.yardsticks[1].make)(&settings).unwrap();
        assert_eq!(made.steps(100), 400);
        let bad = Settings::parse(["words=many"]).unwrap();
        assert!((BENCHABLE.yardsticks[0].make)(&bad).is_err());
    }
}
