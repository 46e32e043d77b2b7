//! `sluice bench kafka`: Kafka -> WordCount -> Kafka through `sluice run` (this program re-run
//! as a child), beside Kafka's own performance tools on the same broker in the same run.
//!
//! The run starts a broker with `scripts/kafka start` (KRaft, one JVM, a fresh data
//! directory) and, in each of `--repeat` rounds: Kafka's `ProducerPerformance` writes
//! `--records` sentences (ten words each, drawn from 1,000) to a new topic of one partition,
//! as fast as it can (its records/s is the producer's figure); Kafka's `ConsumerPerformance`
//! reads them all (the consumer's figure); Sluice's Kafka source reads them all alone (`sluice
//! query -e "count(input('kafka', ...))"`, the figure to set beside the consumer tool's); then
//! `sluice run wordcount` reads the same topic and writes every count as it changes to another,
//! at least once and then exactly once (one transaction per checkpoint, a checkpoint every
//! second); its sentences/s (from its summary) is WordCount's figure. The result: the medians
//! over the rounds of each figure, of the source's and WordCount's rates over the consumer
//! tool's, and of exactly once's rate over at least once's. The broker is stopped at the end,
//! whatever happens.
//!
//! Then, in the same rounds, end-to-end latency at a paced rate (`--latency-rate`, 2,000
//! records/s by default, for `--latency-seconds`; a rate the broker cannot take, as 20,000/s
//! at a load average of 30 on two cores, makes every latency rise through its run):
//! a producer in this process (rdkafka) writes sentences whose first word is the time it sent
//! them (`t` and the nanoseconds since the bench started, a word of its own: WordCount counts
//! it once), and a consumer here (`read_committed`) reads them back; a record's latency is the
//! time the consumer has it minus the time in it, both on this process's monotonic clock,
//! into an HDR histogram. Each run first paces `--latency-lead-in` seconds of records (5 by
//! default) whose first word is `u` and a time, not measured: a broker just started served
//! the first seconds of such traffic (a small produce request and a fetch every few
//! milliseconds) seconds late, its latency rising through the run, and the first run measured
//! (the baseline) took it all, at p50 above WordCount's. Measured three ways on the same broker: the baseline, the consumer
//! reading the producer's topic directly (rdkafka's round trip); WordCount at least once
//! (`--set kafka-follow=true`, the marker word's count read from its output topic); and
//! exactly once, whose output is visible only once the checkpoint after it commits, so its
//! latency is bounded below by about half the checkpoint interval on average (1 s here: a
//! p50 near 0.5 s, a p99 near 1 s more than at least once).
//!
//! `--quick` makes the topic small and runs one round: a smoke test, not figures.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use serde::Serialize;

use crate::foundation::args::checked_repeat;
use crate::foundation::machine;
use crate::foundation::stats::{median, LatencySummary};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

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
    /// Records per second of the latency runs' paced producer (below what the broker takes).
    #[arg(long, value_name = "N", default_value_t = 2_000)]
    latency_rate: u64,
    /// Seconds of paced input of each latency run.
    #[arg(long, value_name = "S", default_value_t = 10)]
    latency_seconds: u64,
    /// Seconds of paced input before each latency run's measured records, not measured: a
    /// broker just started serves this traffic (a produce request and a fetch every few
    /// milliseconds) seconds late for its first few seconds of it.
    #[arg(long, value_name = "S", default_value_t = 5)]
    latency_lead_in: u64,
}

/// The end-to-end latency of one round (the medians of the rounds' percentiles), in
/// microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
struct Latency {
    p50_us: f64,
    p99_us: f64,
    samples: u64,
}

/// One round's figures, in records (sentences) per second.
#[derive(Debug, Clone, Serialize)]
struct Round {
    producer_tool: f64,
    consumer_tool: f64,
    source_alone: f64,
    wordcount_at_least_once: f64,
    wordcount_exactly_once: f64,
    latency_baseline: Latency,
    latency_at_least_once: Latency,
    latency_exactly_once: Latency,
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
    source_alone: f64,
    wordcount_at_least_once: f64,
    wordcount_exactly_once: f64,
    /// Median over the rounds of Sluice's Kafka source's rate, alone, over the consumer
    /// tool's.
    source_alone_over_consumer_tool: f64,
    /// Median over the rounds of WordCount's (at least once) rate over the consumer tool's.
    at_least_once_over_consumer_tool: f64,
    /// Median over the rounds of exactly once's rate over at least once's.
    exactly_once_over_at_least_once: f64,
    latency_rate: u64,
    latency_baseline: Latency,
    latency_at_least_once: Latency,
    latency_exactly_once: Latency,
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

/// The records/s of Sluice's Kafka source alone: `sluice query` (this program) counting
/// `input` (`count(input('kafka', ...))`, a bounded read of its `records` records), from the
/// job's run time on the query's standard error (`N element(s), ... in S s: ...`).
fn run_source_alone(broker: &Broker<'_>, input: &str, records: u64) -> anyhow::Result<f64> {
    let mut command = this_program()?;
    let query = format!("count(input('kafka', '{}', '{input}'));", broker.address);
    let out = command
        .args(["query", "-e", &query])
        .output()
        .context("cannot run sluice query")?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    anyhow::ensure!(out.status.success(), "sluice query failed: {stderr}");
    anyhow::ensure!(
        stdout.trim() == records.to_string(),
        "sluice query counted {:?} records of {input}, not {records}: {stderr}",
        stdout.trim()
    );
    let seconds: f64 = stderr
        .lines()
        .find_map(|line| {
            let (_, rest) = line.split_once(" between stream processes in ")?;
            rest.split_once(" s")?.0.parse().ok()
        })
        .with_context(|| format!("no run time in sluice query's output:\n{stderr}"))?;
    Ok(records as f64 / seconds)
}

/// This program, to be run as a child. The variables of `scripts/kafka` (`SLUICE_KAFKA_*`)
/// are kept from it: `sluice run` and `sluice query` take every `SLUICE_*` variable for one
/// of their options.
fn this_program() -> anyhow::Result<Command> {
    let mut command = Command::new(std::env::current_exe().context("cannot find this program")?);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("SLUICE_KAFKA_") {
            command.env_remove(name);
        }
    }
    Ok(command)
}

/// `sluice run wordcount` (this program) from topic `input` to topic `output`.
fn wordcount_command(
    broker: &Broker<'_>,
    plan: &str,
    input: &str,
    output: &str,
) -> anyhow::Result<Command> {
    let mut command = this_program()?;
    command.args(["run", "wordcount", "--quiet", "--plan", plan]);
    command.args(["--input", &format!("kafka://{}/{input}", broker.address)]);
    command.args(["--output", &format!("kafka://{}/{output}", broker.address)]);
    Ok(command)
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
    let mut command = wordcount_command(broker, plan, input, output)?;
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
    let source_alone = run_source_alone(broker, &input, records)?;
    let checkpoints = dir.join(format!("checkpoints-{round}"));
    let seconds = |full: u64, quick: u64| args.latency_rate * if args.quick { quick } else { full };
    let paced = Paced {
        rate: args.latency_rate,
        lead_in: seconds(args.latency_lead_in, 1),
        records: seconds(args.latency_seconds, 2),
    };
    let latency_baseline = paced.baseline(broker, &format!("paced-{round}"))?;
    let latency_at_least_once = paced.through_wordcount(
        broker,
        &args.plan,
        &format!("paced-alo-{round}"),
        &[],
        &checkpoints,
    )?;
    let latency_exactly_once = paced.through_wordcount(
        broker,
        &args.plan,
        &format!("paced-eo-{round}"),
        &["--set", "delivery=exactly-once", "--checkpoint-every", "1s"],
        &checkpoints,
    )?;
    Ok(Round {
        latency_baseline,
        latency_at_least_once,
        latency_exactly_once,
        producer_tool: producer_rate(&produced)?,
        consumer_tool: consumer_rate(&consumed)?,
        source_alone,
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
        source_alone: of(|r| r.source_alone),
        source_alone_over_consumer_tool: of(|r| r.source_alone / r.consumer_tool),
        wordcount_at_least_once: of(|r| r.wordcount_at_least_once),
        wordcount_exactly_once: of(|r| r.wordcount_exactly_once),
        at_least_once_over_consumer_tool: of(|r| r.wordcount_at_least_once / r.consumer_tool),
        exactly_once_over_at_least_once: of(|r| {
            r.wordcount_exactly_once / r.wordcount_at_least_once
        }),
        latency_rate: args.latency_rate,
        latency_baseline: median_latency(&rounds, |r| r.latency_baseline),
        latency_at_least_once: median_latency(&rounds, |r| r.latency_at_least_once),
        latency_exactly_once: median_latency(&rounds, |r| r.latency_exactly_once),
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
            "  Sluice's Kafka source alone   {:>12.0} records/s  ({:.2}x the consumer tool)",
            result.source_alone, result.source_alone_over_consumer_tool
        );
        println!(
            "  WordCount at least once       {:>12.0} records/s  ({:.2}x the consumer tool)",
            result.wordcount_at_least_once, result.at_least_once_over_consumer_tool
        );
        println!(
            "  WordCount exactly once (1 s)  {:>12.0} records/s  ({:.2}x at least once)",
            result.wordcount_exactly_once, result.exactly_once_over_at_least_once
        );
        println!(
            "End-to-end latency at {} records/s (produce time in the record to a read_committed consumer's receipt):",
            result.latency_rate
        );
        for (what, l) in [
            ("rdkafka producer -> consumer", result.latency_baseline),
            ("WordCount at least once", result.latency_at_least_once),
            ("WordCount exactly once (1 s)", result.latency_exactly_once),
        ] {
            println!(
                "  {what:<30} p50 {:>10.0} us  p99 {:>10.0} us  ({} records)",
                l.p50_us, l.p99_us, l.samples
            );
        }
    }
    Ok(())
}

/// The medians over `rounds` of one latency's percentiles.
fn median_latency(rounds: &[Round], of: fn(&Round) -> Latency) -> Latency {
    let each =
        |f: fn(&Latency) -> f64| median(&rounds.iter().map(|r| f(&of(r))).collect::<Vec<_>>());
    Latency {
        p50_us: each(|l| l.p50_us),
        p99_us: each(|l| l.p99_us),
        samples: rounds.iter().map(|r| of(r).samples).sum(),
    }
}

/// A paced run: `lead_in` records, then the `records` measured, at `rate` a second.
#[derive(Debug, Clone, Copy)]
struct Paced {
    rate: u64,
    lead_in: u64,
    records: u64,
}

/// How long a latency run may wait for its last record before it fails.
const PACED_WAIT: Duration = Duration::from_secs(120);

/// The word that carries a record's send time: `t` and nanoseconds since `epoch`.
fn marker(epoch: Instant) -> String {
    format!("t{}", epoch.elapsed().as_nanos())
}

/// The first word of a lead-in record: `u` and nanoseconds since `epoch`, a word of its own
/// in WordCount as a marker is, but not measured.
fn lead_in_word(epoch: Instant) -> String {
    format!("u{}", epoch.elapsed().as_nanos())
}

/// The send time a record (or a count `WORD<TAB>N`) starts with, if it is a marker.
fn marked_at(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?;
    let digits = text.strip_prefix('t')?;
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

impl Paced {
    /// Record `i` of the run: a lead-in word (the first `lead_in` records) or a marker, then
    /// nine words.
    fn value(&self, i: u64, epoch: Instant) -> String {
        let first = if i < self.lead_in {
            lead_in_word(epoch)
        } else {
            marker(epoch)
        };
        format!(
            "{first} w{} w{} w{} w{} w{} w{} w{} w{} w{}",
            i % 7,
            i % 11,
            i % 13,
            i % 17,
            i % 19,
            i % 23,
            i % 29,
            i % 31,
            i % 37
        )
    }

    /// Writes the records (the lead-in, then those measured) to `topic`, paced, from another
    /// thread; the thread's handle.
    fn produce(
        &self,
        broker: &Broker<'_>,
        topic: &str,
        epoch: Instant,
    ) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", &broker.address)
            .set("linger.ms", "1")
            .create()
            .context("cannot make the paced producer")?;
        let (topic, rate) = (topic.to_owned(), self.rate.max(1));
        let paced = *self;
        Ok(std::thread::spawn(move || {
            let started = Instant::now();
            for i in 0..paced.lead_in + paced.records {
                // Record i is due at i / rate seconds.
                let due = Duration::from_nanos(i.saturating_mul(1_000_000_000) / rate);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    std::thread::sleep(wait);
                }
                let value = paced.value(i, epoch);
                let mut record = BaseRecord::<(), String>::to(&topic).payload(&value);
                loop {
                    match producer.send(record) {
                        Ok(()) => break,
                        Err((_, back)) => {
                            record = back;
                            producer.poll(Duration::from_millis(1));
                        }
                    }
                }
                producer.poll(Duration::ZERO);
            }
            producer
                .flush(Duration::from_secs(30))
                .context("the paced records were not delivered")
        }))
    }

    /// A `read_committed` reader of partition 0 of `topic` from its start (assigned, not
    /// subscribed: no group to join), once it has read a record that `ready` accepts.
    fn reader(
        broker: &Broker<'_>,
        topic: &str,
        ready: impl Fn(&[u8]) -> bool,
    ) -> anyhow::Result<BaseConsumer> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &broker.address)
            .set("group.id", format!("sluice-bench-{topic}"))
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_committed")
            .set("fetch.wait.max.ms", "5")
            .set("fetch.queue.backoff.ms", "0")
            .create()
            .context("cannot make the latency consumer")?;
        let mut partitions = TopicPartitionList::new();
        partitions
            .add_partition_offset(topic, 0, Offset::Beginning)
            .context("cannot name the partition")?;
        consumer.assign(&partitions).context("cannot assign")?;
        let deadline = Instant::now() + PACED_WAIT;
        loop {
            anyhow::ensure!(
                Instant::now() < deadline,
                "{topic}: not ready within {PACED_WAIT:?}"
            );
            if let Some(message) = consumer.poll(Duration::from_millis(100)) {
                let message = message.with_context(|| format!("reading {topic}"))?;
                if message.payload().is_some_and(&ready) {
                    return Ok(consumer);
                }
            }
        }
    }

    /// Reads on until `consumer` (of `topic`) has `self.records` markers; their latencies.
    fn measure(
        &self,
        consumer: &BaseConsumer,
        topic: &str,
        epoch: Instant,
    ) -> anyhow::Result<Latency> {
        let mut histogram = sluice_graph::latency_histogram();
        let deadline = Instant::now() + PACED_WAIT;
        while histogram.len() < self.records {
            anyhow::ensure!(
                Instant::now() < deadline,
                "{topic}: {} of {} records arrived within {PACED_WAIT:?}",
                histogram.len(),
                self.records
            );
            let Some(message) = consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            let message = message.with_context(|| format!("reading {topic}"))?;
            if let Some(sent) = message.payload().and_then(marked_at) {
                let now = epoch.elapsed().as_nanos() as u64;
                histogram.saturating_record(now.saturating_sub(sent).max(1));
            }
        }
        let summary = LatencySummary::from_histogram(&histogram)
            .with_context(|| format!("{topic}: no record to measure (--latency-rate 0?)"))?;
        Ok(Latency {
            p50_us: summary.p50 / 1e3,
            p99_us: summary.p99 / 1e3,
            samples: summary.samples,
        })
    }

    /// The baseline: the consumer reads the producer's topic directly.
    fn baseline(&self, broker: &Broker<'_>, topic: &str) -> anyhow::Result<Latency> {
        warm_up(broker, &[topic])?;
        let consumer = Self::reader(broker, topic, |value| value == WARM_UP.as_bytes())?;
        let epoch = Instant::now();
        let producing = self.produce(broker, topic, epoch)?;
        let latency = self.measure(&consumer, topic, epoch);
        join(producing)?;
        latency
    }

    /// WordCount from `NAME-in` (followed) to `NAME-out` with `extra` arguments; once it
    /// has counted the first record's words, the records are paced in and the markers'
    /// counts read from its output.
    fn through_wordcount(
        &self,
        broker: &Broker<'_>,
        plan: &str,
        name: &str,
        extra: &[&str],
        checkpoints: &Path,
    ) -> anyhow::Result<Latency> {
        let (input, output) = (format!("{name}-in"), format!("{name}-out"));
        warm_up(broker, &[&input, &output])?;
        let seconds = (self.lead_in + self.records) / self.rate.max(1) + 60;
        let mut command = wordcount_command(broker, plan, &input, &output)?;
        command.args([
            "--set",
            "kafka-follow=true",
            "--duration",
            &seconds.to_string(),
        ]);
        command.args(extra);
        if extra.contains(&"--checkpoint-every") {
            command.arg("--checkpoint-dir").arg(checkpoints.join(name));
        }
        command.stdout(std::process::Stdio::null());
        let mut job = command.spawn().context("cannot run sluice run wordcount")?;
        // The count of the first record's last word: WordCount reads and writes.
        let last = format!("{}\t", WARM_UP.rsplit(' ').next().unwrap_or(WARM_UP));
        let measured = Self::reader(broker, &output, |value| value.starts_with(last.as_bytes()))
            .and_then(|consumer| {
                let epoch = Instant::now();
                let producing = self.produce(broker, &input, epoch)?;
                let latency = self.measure(&consumer, &output, epoch);
                join(producing)?;
                latency
            });
        let _ = job.kill();
        let _ = job.wait();
        measured
    }
}

/// The first record of every topic of a latency run, not a marker.
const WARM_UP: &str = "warm up";

/// Makes `topics` (the broker creates a topic on its first record) with one record each.
fn warm_up(broker: &Broker<'_>, topics: &[&str]) -> anyhow::Result<()> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &broker.address)
        .create()
        .context("cannot make a producer")?;
    for topic in topics {
        producer
            .send(BaseRecord::<(), str>::to(topic).payload(WARM_UP))
            .map_err(|(e, _)| e)
            .context("cannot send the first record")?;
    }
    producer
        .flush(Duration::from_secs(30))
        .context("the first records were not delivered")
}

/// Waits for the producer thread; its result.
fn join(thread: std::thread::JoinHandle<anyhow::Result<()>>) -> anyhow::Result<()> {
    thread
        .join()
        .map_err(|_| anyhow::anyhow!("the paced producer panicked"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lead-in's records carry no marker (they are not measured); every record after it
    /// carries its send time.
    #[test]
    fn only_the_records_after_the_lead_in_are_measured() {
        let paced = Paced {
            rate: 1000,
            lead_in: 3,
            records: 2,
        };
        let epoch = Instant::now();
        let marked: Vec<bool> = (0..5)
            .map(|i| marked_at(paced.value(i, epoch).as_bytes()).is_some())
            .collect();
        assert_eq!(marked, [false, false, false, true, true]);
    }
}
