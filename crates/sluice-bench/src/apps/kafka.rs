//! `sluice bench kafka`: Kafka -> WordCount -> Kafka through `sluice run` (this program re-run
//! as a child), beside Kafka's own performance tools on the same broker in the same run.
//!
//! The run starts a broker with `scripts/kafka start` (KRaft, one JVM, a fresh data
//! directory) and, in each of `--repeat` rounds: Kafka's `ProducerPerformance` writes
//! `--records` sentences (ten words each, drawn from 1,000) to a new topic of one partition,
//! as fast as it can (its records/s is the producer's figure); Kafka's `ConsumerPerformance`
//! reads them all (the consumer's figure); then `sluice run wordcount` reads the same topic
//! and writes every count as it changes to another, at least once and then exactly once (one
//! transaction per checkpoint, a checkpoint every second); its sentences/s (from its summary)
//! is Sluice's figure. The result: the medians over the rounds of each figure, of WordCount's
//! rate over the consumer tool's, and of exactly once's rate over at least once's. The broker
//! is stopped at the end, whatever happens.
//!
//! `--quick` makes the topic small and runs one round: a smoke test, not figures.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;

use crate::foundation::args::checked_repeat;
use crate::foundation::machine;
use crate::foundation::stats::median;

/// Arguments of `sluice bench kafka`.
#[derive(Debug, Clone, Args)]
pub struct KafkaBenchArgs {
    /// Rounds (each: produce, consume, WordCount at least once and exactly once).
    #[arg(long, value_name = "R", default_value_t = 3)]
    repeat: usize,
    /// Sentences written to the input topic each round.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    records: u64,
    /// WordCount's plan.
    #[arg(long, default_value = "two-threads")]
    plan: String,
    /// The script that starts and stops the broker and runs Kafka's tools.
    #[arg(long, value_name = "PATH", default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/kafka"))]
    kafka_script: PathBuf,
    /// A small topic and one round: a smoke test, not figures.
    #[arg(long)]
    quick: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// One round's figures, in records (sentences) per second.
#[derive(Debug, Clone, Serialize)]
struct Round {
    producer_tool: f64,
    consumer_tool: f64,
    wordcount_at_least_once: f64,
    wordcount_exactly_once: f64,
}

/// The result: every round, and the medians.
#[derive(Debug, Serialize)]
struct KafkaBench {
    commit: &'static str,
    cpu: String,
    cores: usize,
    load_average: Option<f64>,
    records: u64,
    plan: String,
    rounds: Vec<Round>,
    producer_tool: f64,
    consumer_tool: f64,
    wordcount_at_least_once: f64,
    wordcount_exactly_once: f64,
    /// Median over the rounds of WordCount's (at least once) rate over the consumer tool's.
    at_least_once_over_consumer_tool: f64,
    /// Median over the rounds of exactly once's rate over at least once's.
    exactly_once_over_at_least_once: f64,
}

/// The broker `scripts/kafka start` started; stopped when dropped.
struct Broker<'a> {
    script: &'a Path,
    address: String,
}

impl<'a> Broker<'a> {
    fn start(script: &'a Path) -> anyhow::Result<Self> {
        let out = Command::new("bash")
            .arg(script)
            .arg("start")
            .output()
            .with_context(|| format!("cannot run {}", script.display()))?;
        if !out.status.success() {
            bail!(
                "{} start failed: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let address = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok(Self { script, address })
    }

    /// Runs one of Kafka's tools (`org.apache.kafka.tools.CLASS`); its standard output.
    fn tool(&self, class: &str, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new("bash")
            .arg(self.script)
            .args(["tools", &format!("org.apache.kafka.tools.{class}")])
            .args(args)
            .output()
            .with_context(|| format!("cannot run {class}"))?;
        if !out.status.success() {
            bail!("{class} failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for Broker<'_> {
    fn drop(&mut self) {
        let _ = Command::new("bash").arg(self.script).arg("stop").status();
    }
}

/// Sentences of ten words drawn from `w0`..`w999` (a fixed xorshift), one a line, for
/// `ProducerPerformance --payload-file` (it sends a random line of it per record).
fn write_payloads(path: &Path) -> anyhow::Result<()> {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut text = String::new();
    for _ in 0..10_000 {
        let words: Vec<String> = (0..10)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                format!("w{}", state % 1000)
            })
            .collect();
        writeln!(text, "{}", words.join(" "))?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The records/s of `ProducerPerformance`'s last line: `N records sent, R records/sec (...`.
fn producer_rate(output: &str) -> anyhow::Result<f64> {
    output
        .lines()
        .rev()
        .find_map(|line| {
            let (_, rest) = line.split_once(" records sent, ")?;
            rest.split_once(" records/sec")?.0.trim().parse().ok()
        })
        .with_context(|| format!("no rate in ProducerPerformance's output:\n{output}"))
}

/// `nMsg.sec` of `ConsumerPerformance`'s output (a header line, then one line of values).
fn consumer_rate(output: &str) -> anyhow::Result<f64> {
    let mut lines = output.lines().filter(|l| !l.trim().is_empty());
    let header: Vec<&str> = lines.next().unwrap_or_default().split(", ").collect();
    let values: Vec<&str> = lines.next().unwrap_or_default().split(", ").collect();
    header
        .iter()
        .position(|h| h.trim() == "nMsg.sec")
        .and_then(|i| values.get(i)?.trim().parse().ok())
        .with_context(|| format!("no nMsg.sec in ConsumerPerformance's output:\n{output}"))
}

/// The sentences/s of WordCount's summary line `sentences: N in S s = R/s`.
fn wordcount_rate(summary: &str) -> anyhow::Result<f64> {
    summary
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix("sentences: ")?;
            rest.rsplit_once(" = ")?.1.strip_suffix("/s")?.parse().ok()
        })
        .with_context(|| format!("no sentences rate in WordCount's summary:\n{summary}"))
}

/// Runs WordCount from `input` to a new topic with `delivery`; its sentences/s.
fn run_wordcount(
    broker: &Broker<'_>,
    plan: &str,
    input: &str,
    output: &str,
    delivery: &str,
    checkpoints: &Path,
) -> anyhow::Result<f64> {
    let mut command = Command::new(std::env::current_exe().context("cannot find this program")?);
    command.args(["run", "wordcount", "--quiet", "--plan", plan]);
    command.args(["--input", &format!("kafka://{}/{input}", broker.address)]);
    command.args(["--output", &format!("kafka://{}/{output}", broker.address)]);
    command.args(["--set", &format!("delivery={delivery}")]);
    if delivery == "exactly-once" {
        command.args(["--checkpoint-every", "1s", "--checkpoint-dir"]);
        command.arg(checkpoints);
    }
    let out = command
        .output()
        .context("cannot run sluice run wordcount")?;
    if !out.status.success() {
        bail!(
            "sluice run wordcount failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    wordcount_rate(&String::from_utf8_lossy(&out.stdout))
}

/// One round on topics named after `round`.
fn round(
    broker: &Broker<'_>,
    args: &KafkaBenchArgs,
    records: u64,
    round: usize,
    dir: &Path,
) -> anyhow::Result<Round> {
    let payloads = dir.join("sentences.txt");
    let input = format!("lines-{round}");
    let records_text = records.to_string();
    let produced = broker.tool(
        "ProducerPerformance",
        &[
            "--topic",
            &input,
            "--num-records",
            &records_text,
            "--throughput",
            "-1",
            "--payload-file",
            payloads
                .to_str()
                .context("a temporary path that is not UTF-8")?,
            "--producer-props",
            &format!("bootstrap.servers={}", broker.address),
        ],
    )?;
    let consumed = broker.tool(
        "ConsumerPerformance",
        &[
            "--bootstrap-server",
            &broker.address,
            "--topic",
            &input,
            "--messages",
            &records_text,
            "--timeout",
            "120000",
        ],
    )?;
    let checkpoints = dir.join(format!("checkpoints-{round}"));
    Ok(Round {
        producer_tool: producer_rate(&produced)?,
        consumer_tool: consumer_rate(&consumed)?,
        wordcount_at_least_once: run_wordcount(
            broker,
            &args.plan,
            &input,
            &format!("counts-alo-{round}"),
            "at-least-once",
            &checkpoints,
        )?,
        wordcount_exactly_once: run_wordcount(
            broker,
            &args.plan,
            &input,
            &format!("counts-eo-{round}"),
            "exactly-once",
            &checkpoints,
        )?,
    })
}

/// Runs `sluice bench kafka`.
pub fn main(args: &KafkaBenchArgs) -> anyhow::Result<()> {
    let (repeat, records) = if args.quick {
        (1, 20_000)
    } else {
        (checked_repeat(args.repeat)?, args.records)
    };
    anyhow::ensure!(records > 0, "--records takes a count above 0");
    let dir = tempfile::tempdir().context("no temporary directory")?;
    write_payloads(&dir.path().join("sentences.txt"))?;
    let broker = Broker::start(&args.kafka_script)?;
    eprintln!("Kafka broker at {}", broker.address);
    let mut rounds = Vec::new();
    for r in 0..repeat {
        let figures = round(&broker, args, records, r, dir.path())?;
        eprintln!("round {}: {figures:?}", r + 1);
        rounds.push(figures);
    }
    drop(broker);
    let of = |f: fn(&Round) -> f64| median(&rounds.iter().map(f).collect::<Vec<_>>());
    let result = KafkaBench {
        commit: machine::commit(),
        cpu: machine::cpu(),
        cores: machine::cores(),
        load_average: machine::load_average(),
        records,
        plan: args.plan.clone(),
        producer_tool: of(|r| r.producer_tool),
        consumer_tool: of(|r| r.consumer_tool),
        wordcount_at_least_once: of(|r| r.wordcount_at_least_once),
        wordcount_exactly_once: of(|r| r.wordcount_exactly_once),
        at_least_once_over_consumer_tool: of(|r| r.wordcount_at_least_once / r.consumer_tool),
        exactly_once_over_at_least_once: of(|r| {
            r.wordcount_exactly_once / r.wordcount_at_least_once
        }),
        rounds,
    };
    if args.json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        println!(
            "Kafka (one partition, {} sentences of 10 words a round, medians of {} rounds; commit {}, {} cores, load {:.1})",
            result.records,
            result.rounds.len(),
            result.commit,
            result.cores,
            result.load_average.unwrap_or(0.0)
        );
        println!(
            "  ProducerPerformance           {:>12.0} records/s",
            result.producer_tool
        );
        println!(
            "  ConsumerPerformance           {:>12.0} records/s",
            result.consumer_tool
        );
        println!(
            "  WordCount at least once       {:>12.0} records/s  ({:.2}x the consumer tool)",
            result.wordcount_at_least_once, result.at_least_once_over_consumer_tool
        );
        println!(
            "  WordCount exactly once (1 s)  {:>12.0} records/s  ({:.2}x at least once)",
            result.wordcount_exactly_once, result.exactly_once_over_at_least_once
        );
    }
    Ok(())
}
