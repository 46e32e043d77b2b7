//! `sluice feed`: the synthetic OPRA-style options feed of `sluice-feed`, outside any job.
//!
//! - `sluice feed send --rate-multiple R [--group G --port P | --to ADDR,...] [--duration S]
//!   [--packets N] [--replay FILE [--recorded-pacing]] [--only-channels C,...] [feed settings]
//!   [--json]` sends each
//!   channel's packets over UDP at `R` x 24,000 packets/s in aggregate (the February 2008 OPRA
//!   rate), to a multicast group per channel on loopback (`G`, `G + 1`, ...) or to one unicast
//!   address per channel, until the duration, the packet count, the recording's end or Ctrl-C;
//!   then prints what it sent and the rate it achieved.
//! - `sluice feed record FILE --packets N [--rate-multiple R] [feed settings]` writes the first
//!   `N` packets of the generated feed to a recording, with the send offsets of rate `R`.
//! - `sluice feed dump FILE [--packets N]` prints what generated a recording and its first
//!   packets, decoded.
//!
//! A recording keeps the feed settings that generated it, so `send --replay` accepts settings
//! that repeat them (a caller may pass the same command line either way) and refuses any that
//! contradict them.
//!
//! The feed settings (`--channels`, `--underlyings`, `--series-per-underlying`,
//! `--zipf-exponent`, `--messages-per-packet`, `--trade-fraction`, `--exchanges`, `--seed`)
//! default to `sluice_feed::FeedConfig::default()`.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use sluice_feed::{
    decode_packet, Destinations, FeedConfig, MessageKind, Pacing, PacketSource, Replay,
    SendOptions, SendReport, OPRA_FEB_2008_PACKETS_PER_SEC,
};

use crate::plan_choice::parse_seconds;
use crate::stdout::tell;

/// Arguments of `sluice feed`.
#[derive(Args, Debug)]
pub(crate) struct FeedArgs {
    #[command(subcommand)]
    command: FeedCommand,
}

#[derive(Subcommand, Debug)]
enum FeedCommand {
    /// Send the feed over UDP at a multiple of the February 2008 OPRA rate.
    Send(SendArgs),
    /// Record the generated feed to a file.
    Record(RecordArgs),
    /// Print a recording's first packets, decoded.
    Dump(DumpArgs),
}

/// The feed's shape; each defaults to `FeedConfig::default()`'s.
#[derive(Args, Debug, Default)]
struct FeedSettings {
    /// Channels, each its own packet stream [default: 4].
    #[arg(long)]
    channels: Option<usize>,
    /// Underlying symbols [default: 2000].
    #[arg(long)]
    underlyings: Option<u32>,
    /// Option series per underlying [default: 48].
    #[arg(long)]
    series_per_underlying: Option<u32>,
    /// The Zipf exponent of the underlyings' popularity [default: 1].
    #[arg(long)]
    zipf_exponent: Option<f64>,
    /// The most messages per packet; each packet carries 1 to this many [default: 8].
    #[arg(long)]
    messages_per_packet: Option<u16>,
    /// The fraction of messages that are trades [default: 0.02].
    #[arg(long)]
    trade_fraction: Option<f64>,
    /// Participant exchanges [default: 7].
    #[arg(long)]
    exchanges: Option<u8>,
    /// The generator's seed [default: 20080204].
    #[arg(long)]
    seed: Option<u64>,
}

impl FeedSettings {
    /// `base` with the settings given.
    fn over(&self, base: &FeedConfig) -> FeedConfig {
        FeedConfig {
            channels: self.channels.unwrap_or(base.channels),
            underlyings: self.underlyings.unwrap_or(base.underlyings),
            series_per_underlying: self
                .series_per_underlying
                .unwrap_or(base.series_per_underlying),
            zipf_exponent: self.zipf_exponent.unwrap_or(base.zipf_exponent),
            max_messages_per_packet: self
                .messages_per_packet
                .unwrap_or(base.max_messages_per_packet),
            trade_fraction: self.trade_fraction.unwrap_or(base.trade_fraction),
            exchanges: self.exchanges.unwrap_or(base.exchanges),
            seed: self.seed.unwrap_or(base.seed),
        }
    }

    /// The default feed with the settings given, checked.
    fn config(&self) -> anyhow::Result<FeedConfig> {
        let config = self.over(&FeedConfig::default());
        config.validate()?;
        Ok(config)
    }

    /// Checks that the settings given agree with the recording `path`'s: a replay sends the
    /// recorded packets, so settings may only repeat what they were generated with.
    fn check_against_recording(&self, path: &Path) -> anyhow::Result<()> {
        let replay = Replay::open(path)?;
        match replay.config() {
            Some(recorded) if self.over(recorded) != *recorded => anyhow::bail!(
                "the feed settings given disagree with the recording {}, generated with {}",
                path.display(),
                describe(recorded)
            ),
            Some(_) => Ok(()),
            None if self.over_any_but_channels()
                || self.channels.is_some_and(|c| c != replay.channels()) =>
            {
                anyhow::bail!(
                    "the recording {} does not say what generated it: give no feed settings but \
                     --channels {}",
                    path.display(),
                    replay.channels()
                )
            }
            None => Ok(()),
        }
    }

    /// Whether a setting other than `--channels` was given.
    fn over_any_but_channels(&self) -> bool {
        self.underlyings.is_some()
            || self.series_per_underlying.is_some()
            || self.zipf_exponent.is_some()
            || self.messages_per_packet.is_some()
            || self.trade_fraction.is_some()
            || self.exchanges.is_some()
            || self.seed.is_some()
    }
}

/// A feed config as its settings.
fn describe(c: &FeedConfig) -> String {
    format!(
        "--channels {} --underlyings {} --series-per-underlying {} --zipf-exponent {} \
         --messages-per-packet {} --trade-fraction {} --exchanges {} --seed {}",
        c.channels,
        c.underlyings,
        c.series_per_underlying,
        c.zipf_exponent,
        c.max_messages_per_packet,
        c.trade_fraction,
        c.exchanges,
        c.seed
    )
}

/// Arguments of `sluice feed send`.
#[derive(Args, Debug)]
struct SendArgs {
    /// The aggregate rate, in multiples of 24,000 packets/s (February 2008 OPRA).
    #[arg(long, default_value_t = 1.0)]
    rate_multiple: f64,
    /// The first channel's multicast group; channel c goes to this address + c, on loopback.
    #[arg(long, default_value = "239.255.0.1", conflicts_with = "to")]
    group: Ipv4Addr,
    /// The UDP port of the multicast groups.
    #[arg(long, default_value_t = 31_000, conflicts_with = "to")]
    port: u16,
    /// Unicast instead: one address per channel, comma-separated, in channel order.
    #[arg(long, value_delimiter = ',', conflicts_with = "shm")]
    to: Vec<SocketAddr>,
    /// Shared memory instead: into the rings the feed handlers of the shared-memory feed of
    /// this name made (`sluice run omdp --set feed=shm`), dropping a packet whose ring is full.
    #[arg(long)]
    shm: Option<String>,
    /// Stop after this many seconds.
    #[arg(long, value_parser = parse_seconds)]
    duration: Option<Duration>,
    /// Stop after this many packets.
    #[arg(long)]
    packets: Option<u64>,
    /// Replay this recording (once) instead of generating; feed settings given must agree
    /// with those it was generated with.
    #[arg(long)]
    replay: Option<PathBuf>,
    /// With --replay: send at the recording's send offsets instead of --rate-multiple.
    #[arg(long, requires = "replay")]
    recorded_pacing: bool,
    /// Send only these channels (comma-separated; default all), each at its share of the
    /// rate: a feed split over several sender processes.
    #[arg(long, value_delimiter = ',')]
    only_channels: Vec<usize>,
    /// The most packets of a channel per sendmmsg call.
    #[arg(long, default_value_t = 64)]
    batch: usize,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    settings: FeedSettings,
}

/// Arguments of `sluice feed record`.
#[derive(Args, Debug)]
struct RecordArgs {
    /// The recording to write.
    file: PathBuf,
    /// How many packets.
    #[arg(long)]
    packets: u64,
    /// The rate whose send offsets the recording holds, in multiples of 24,000 packets/s.
    #[arg(long, default_value_t = 1.0)]
    rate_multiple: f64,
    #[command(flatten)]
    settings: FeedSettings,
}

/// Arguments of `sluice feed dump`.
#[derive(Args, Debug)]
struct DumpArgs {
    /// The recording to read.
    file: PathBuf,
    /// How many packets to print (0: all).
    #[arg(long, default_value_t = 5)]
    packets: u64,
}

pub(crate) fn feed(args: FeedArgs) -> anyhow::Result<()> {
    match args.command {
        FeedCommand::Send(args) => send(args),
        FeedCommand::Record(args) => record(args),
        FeedCommand::Dump(args) => dump(args),
    }
}

fn send(args: SendArgs) -> anyhow::Result<()> {
    let source = match &args.replay {
        Some(path) => {
            args.settings.check_against_recording(path)?;
            PacketSource::Replay(path.clone())
        }
        None => PacketSource::Generate(args.settings.config()?),
    };
    let destinations = match (&args.shm, args.to.is_empty()) {
        (Some(feed), _) => Destinations::Shm(feed.clone()),
        (None, true) => Destinations::loopback_multicast(args.group, args.port),
        (None, false) => Destinations::Unicast(args.to.clone()),
    };
    let options = SendOptions {
        source,
        destinations,
        pacing: if args.recorded_pacing {
            Pacing::Recorded
        } else {
            Pacing::RateMultiple(args.rate_multiple)
        },
        duration: args.duration,
        max_packets: args.packets,
        batch: args.batch,
        channels: (!args.only_channels.is_empty()).then(|| args.only_channels.clone()),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .context("cannot install the Ctrl-C handler")?;
    if !args.json {
        let pace = if args.recorded_pacing {
            "at the recorded send times".to_owned()
        } else {
            format!(
                "at {} x {OPRA_FEB_2008_PACKETS_PER_SEC} packets/s",
                args.rate_multiple
            )
        };
        let duration = args
            .duration
            .map_or(String::new(), |d| format!(" for {:.1} s", d.as_secs_f64()));
        tell(format_args!("sending {pace}{duration} (Ctrl-C stops)"));
    }
    let report = sluice_feed::send(&options, &stop)?;
    print_report(&report, args.json)
}

fn print_report(report: &SendReport, json: bool) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        let object = serde_json::json!({
            "packets": report.packets,
            "messages": report.messages,
            "packets_per_channel": report.packets_per_channel,
            "messages_per_channel": report.messages_per_channel,
            "elapsed_s": report.elapsed.as_secs_f64(),
            "target_packets_per_sec": report.target_packets_per_sec,
            "achieved_packets_per_sec": report.achieved_packets_per_sec,
            "achieved_rate_multiple":
                report.achieved_packets_per_sec / OPRA_FEB_2008_PACKETS_PER_SEC as f64,
            "max_lag_us": report.max_lag.as_secs_f64() * 1e6,
            "system_calls": report.system_calls,
            "dropped": report.dropped,
        });
        writeln!(out, "{object}")?;
        return Ok(());
    }
    writeln!(
        out,
        "sent {} packets ({} messages) on {} channels in {:.3} s: {:.0} packets/s ({:.2} x OPRA \
         Feb 2008){}",
        report.packets,
        report.messages,
        report.packets_per_channel.len(),
        report.elapsed.as_secs_f64(),
        report.achieved_packets_per_sec,
        report.achieved_packets_per_sec / OPRA_FEB_2008_PACKETS_PER_SEC as f64,
        report
            .target_packets_per_sec
            .map_or(String::new(), |t| format!(" of {t:.0} asked"))
    )?;
    writeln!(
        out,
        "{} sendmmsg calls; at worst {:.0} us behind schedule; {} dropped (a full ring)",
        report.system_calls,
        report.max_lag.as_secs_f64() * 1e6,
        report.dropped
    )?;
    Ok(())
}

fn record(args: RecordArgs) -> anyhow::Result<()> {
    let config = args.settings.config()?;
    let messages =
        sluice_feed::record_generated(&config, &args.file, args.packets, args.rate_multiple)?;
    writeln!(
        std::io::stdout(),
        "recorded {} packets ({messages} messages) of {} channels to {}",
        args.packets,
        config.channels,
        args.file.display()
    )?;
    Ok(())
}

/// A price in 1/10,000 of a dollar, in dollars.
fn dollars(price: u64) -> String {
    format!("{}.{:04}", price / 10_000, price % 10_000)
}

fn dump(args: DumpArgs) -> anyhow::Result<()> {
    let mut replay = Replay::open(&args.file)?;
    let mut out = std::io::stdout().lock();
    match replay.config() {
        Some(config) => writeln!(out, "generated with {}", describe(config))?,
        None => writeln!(out, "{} channels", replay.channels())?,
    }
    let mut packet = Vec::new();
    let mut messages = Vec::new();
    let mut printed = 0;
    while args.packets == 0 || printed < args.packets {
        let Some(replayed) = replay.next_packet(&mut packet)? else {
            break;
        };
        printed += 1;
        let header = match decode_packet(&packet, &mut messages) {
            Ok(header) => header,
            Err(error) => {
                writeln!(
                    out,
                    "channel {} at {} ns: undecodable packet of {} bytes: {error}",
                    replayed.channel,
                    replayed.send_offset_ns,
                    packet.len()
                )?;
                continue;
            }
        };
        writeln!(
            out,
            "channel {} packet {} at {} ns: {} messages from seq {} in {} bytes",
            header.channel,
            header.packet_seq,
            replayed.send_offset_ns,
            header.count,
            header.first_seq,
            packet.len()
        )?;
        for m in &messages {
            match m.kind {
                MessageKind::Quote => writeln!(
                    out,
                    "  {:>8} quote underlying {:>5} series {:>7} exchange {}: bid {} @ {}, ask {} @ {}",
                    m.seq,
                    m.underlying,
                    m.series,
                    m.exchange,
                    m.bid_size,
                    dollars(m.bid_price),
                    m.ask_size,
                    dollars(m.ask_price)
                )?,
                MessageKind::Trade => writeln!(
                    out,
                    "  {:>8} trade underlying {:>5} series {:>7} exchange {}: {} @ {}",
                    m.seq,
                    m.underlying,
                    m.series,
                    m.exchange,
                    m.trade_size,
                    dollars(m.trade_price)
                )?,
            }
        }
    }
    Ok(())
}
