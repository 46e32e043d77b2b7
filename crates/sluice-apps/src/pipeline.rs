//! The compression and encryption pipelines of Muralidharan, Casey and Gregg's parallel
//! runtime paper (Trinity College Dublin): generated data cut into packets, compressed with
//! zlib (`compress`) or encrypted with AES-256-GCM (`encrypt`) by the senders, sent across
//! whatever transport the plan puts between the stages, and decompressed or decrypted by the
//! receivers, which check every byte against the input made again from its seed.
//!
//! ```text
//! packets --key-by(flow)--> generate (xS) --forward--> compress (xS)
//!         --key-by(flow)--> decompress (xR) --forward--> verify (xR)
//! ```
//!
//! S is `--set senders`, R `--set receivers`. The input ([`data`]) is `--set size` bytes in
//! packets of `--set packet` bytes dealt over `--set flows` flows. The source `packets` only
//! cuts the input: it hands out which packet of which flow comes next, in the input's order,
//! and the senders make the packets' bytes (generate) and compress or encrypt them, as the
//! paper's senders did. Every stage but the source is stateless and replicated with flow
//! affinity: both edges that spread packets over instances are partitioned by flow, so all of
//! a flow's packets go through one sender and one receiver, in order (as the paper's
//! receive-side scaling put a flow on one queue). The sink checks that order too. With the
//! default 64 flows the partition hash deals 31 and 33 flows to two instances, 16 +- 1 to
//! four.
//!
//! A packet the receiver cannot take back, whose bytes differ from the input, or that comes
//! out of order fails the job with an error naming the packet (`flow F packet S`) and what
//! failed; `--set corrupt=F:S` flips one byte of that packet on the wire, after it was
//! compressed or encrypted, to see it happen. What each stage does to a packet, and why `ring`:
//! [`codec`].
//!
//! The job ends at the end of the input (or at `--duration`, after which the summary says how
//! much of the input was verified). `--rate` paces the source, in packets per second.

pub mod codec;
pub mod data;

use sluice_graph::{
    expect_tuple, Operator, OperatorError, OperatorReport, Output, Partitioning, Produced,
    Snapshot, Source,
};
use sluice_ops::{Dataflow, Pacer};
use sluice_plan::{EdgeSpec, PlanFile, ThreadSpec};
use sluice_runtime::JobReport;
use sluice_transport::udp_mq::{QueueChoice, UdpMqParams};
use sluice_transport::TransportSpec;
use sluice_types::TupleRef;

use crate::{latency_line, App, AppConfig, AppError, AppSpec, Settings};
use codec::{Decoder, Encoder, Stage};
use data::{Layout, Packet, PacketId, TextGenerator};

/// The registry entry of the compression pipeline.
pub const COMPRESS: AppSpec = AppSpec {
    name: "compress",
    about: "generated text compressed with zlib by the senders, decompressed and checked byte for byte by the receivers (TCD parallel runtime paper)",
    settings: &[
        SIZE,
        PACKET,
        SENDERS,
        RECEIVERS,
        FLOWS,
        ("level", "zlib compression level, 0 to 9 (default 6, zlib's own)"),
        SEED,
        CORRUPT,
    ],
    build: build_compress,
    plans: &[],
};

/// The registry entry of the encryption pipeline.
pub const ENCRYPT: AppSpec = AppSpec {
    name: "encrypt",
    about: "generated text encrypted with AES-256-GCM by the senders, decrypted and checked byte for byte by the receivers (TCD parallel runtime paper)",
    settings: &[SIZE, PACKET, SENDERS, RECEIVERS, FLOWS, SEED, CORRUPT],
    build: build_encrypt,
    plans: &[],
};

const SIZE: (&str, &str) = (
    "size",
    "bytes of input in all, 1 to 2^40 (default 64 MiB for compress, 512 MiB for encrypt; the paper: 1.28 GB and 2.56 GB)",
);
const PACKET: (&str, &str) = ("packet", "bytes of a packet, 64 to 16 MiB (default 16384)");
const SENDERS: (&str, &str) = (
    "senders",
    "instances of the generating and of the compressing or encrypting stage, 1 to 256 (default 1)",
);
const RECEIVERS: (&str, &str) = (
    "receivers",
    "instances of the decompressing or decrypting stage and of the checking sink, 1 to 256 (default 1)",
);
const FLOWS: (&str, &str) = (
    "flows",
    "flows the packets are dealt over, at least the senders, up to 65536 (default 64)",
);
const SEED: (&str, &str) = (
    "seed",
    "seed of the generated text and of the key (default 1)",
);
const CORRUPT: (&str, &str) = (
    "corrupt",
    "FLOW:SEQ flips one byte of that packet on the wire, to see the receiver refuse it (default: none)",
);

/// The default input of `compress`: a few seconds at zlib's default level on one core.
pub const DEFAULT_COMPRESS_SIZE: usize = 64 << 20;
/// The default input of `encrypt`, which runs several times faster.
pub const DEFAULT_ENCRYPT_SIZE: usize = 512 << 20;
/// The largest input (`--set size`).
pub const MAX_SIZE: usize = 1 << 40;
/// The largest packet (`--set packet`).
pub const MAX_PACKET: usize = 16 << 20;
/// The smallest packet.
pub const MIN_PACKET: usize = 64;
/// The most senders, and the most receivers.
pub const MAX_PARALLELISM: usize = 256;
/// The most flows.
pub const MAX_FLOWS: usize = 1 << 16;

/// A pipeline as its settings describe it.
#[derive(Debug, Clone)]
pub struct Pipeline {
    /// What the senders do.
    pub stage: Stage,
    /// The input.
    pub layout: Layout,
    /// Instances of the sending stages.
    pub senders: usize,
    /// Instances of the receiving stages.
    pub receivers: usize,
    /// The packet whose byte is flipped on the wire.
    pub corrupt: Option<(u32, u64)>,
}

impl Pipeline {
    /// Reads the settings of the pipeline `app` (`compress` or `encrypt`).
    pub fn from_settings(app: &str, settings: &Settings) -> Result<Self, AppError> {
        let (stage, default_size) = if app == COMPRESS.name {
            let level = settings.get_in("level", 6, 0..=9)? as u32;
            (Stage::Compress { level }, DEFAULT_COMPRESS_SIZE)
        } else {
            (Stage::Encrypt, DEFAULT_ENCRYPT_SIZE)
        };
        let senders = settings.get_in("senders", 1, 1..=MAX_PARALLELISM)?;
        let flows = settings.get_in("flows", 64, 1..=MAX_FLOWS)?;
        if flows < senders {
            return Err(AppError::BadSetting {
                key: "flows".into(),
                reason: format!("{flows} flows cannot keep {senders} senders busy: give at least as many flows as senders"),
            });
        }
        let layout = Layout {
            size: settings.get_in("size", default_size, 1..=MAX_SIZE)? as u64,
            packet: settings.get_in("packet", 16 << 10, MIN_PACKET..=MAX_PACKET)?,
            flows: flows as u32,
            seed: settings.get("seed", 1)?,
        };
        let corrupt = match settings.get("corrupt", String::new())?.as_str() {
            "" => None,
            text => Some(packet_in(&layout, text)?),
        };
        Ok(Self {
            stage,
            layout,
            senders,
            receivers: settings.get_in("receivers", 1, 1..=MAX_PARALLELISM)?,
            corrupt,
        })
    }

    /// The name of the application.
    pub fn app(&self) -> &'static str {
        match self.stage {
            Stage::Compress { .. } => COMPRESS.name,
            Stage::Encrypt => ENCRYPT.name,
        }
    }
}

/// The paper's execution engines as a plan: a thread per sender running its instances of
/// `generate` and of the encoding stage, a thread per receiver running its instances of the
/// decoding stage and of `verify`, and a thread of its own for the source, which only hands
/// out packet ids (fused with a sender, it would hand the other senders their next packets only
/// after its own sender had done its share). With `processes`, each sender and receiver is a
/// PE (process) of its own, joined by shared memory, and the source's thread runs in the first
/// sender's PE.
pub fn engines(pipeline: &Pipeline, processes: bool) -> PlanFile {
    let (encode, decode) = pipeline.stage.operator_names();
    let thread = |name: String, pe: &str, operators: Vec<String>| ThreadSpec {
        pe: processes.then(|| pe.to_string()),
        name,
        operators,
        core: None,
        host: None,
    };
    let dealer = thread("dealer".into(), "sender0", vec!["packets".into()]);
    let senders = (0..pipeline.senders).map(|i| {
        let name = format!("sender{i}");
        let operators = vec![format!("generate[{i}]"), format!("{encode}[{i}]")];
        thread(name.clone(), &name, operators)
    });
    let receivers = (0..pipeline.receivers).map(|i| {
        let name = format!("receiver{i}");
        let operators = vec![format!("{decode}[{i}]"), format!("verify[{i}]")];
        thread(name.clone(), &name, operators)
    });
    PlanFile {
        threads: std::iter::once(dealer)
            .chain(senders)
            .chain(receivers)
            .collect(),
        ..PlanFile::default()
    }
}

/// The largest packet (`--set packet`) that crosses [`udp_mq_between_engines`]: one packet,
/// once compressed or encrypted (a few bytes more at worst), and its 12-byte header must fit
/// one datagram's 65,464 bytes of tuple; 60 KiB leaves room for the codec's overhead.
pub const MAX_UDP_MQ_PACKET: usize = 60 << 10;

/// Datagrams in each queue's ring of a [`udp_mq_between_engines`] edge: each datagram is up
/// to 64 KiB, so a sender keeps 512 KiB per queue.
const UDP_MQ_BATCH: usize = 8;

/// The socket buffers of a [`udp_mq_between_engines`] edge: Linux's usual `rmem_max`, so a
/// receiver busy decompressing can hold a few hundred packets before the kernel drops any.
const UDP_MQ_SOCKET_BUFFER: usize = 4 << 20;

/// The TCD paper's link between its senders and receivers, to pin on a plan (its
/// `[[edge]]`): the encoded packets cross `udp-mq` with `queues` sockets a side, sent and
/// received in batches (the paper's Algorithms 1 and 2), in datagrams of up to 64 KiB. Each
/// packet's queue is a hash of its flow (the first four bytes of its encoding), so a flow
/// keeps one queue and its order, which the sink checks; a random queue per datagram (the
/// paper's choice) would let a flow's packets overtake each other. `udp-mq` is at most once:
/// a lost datagram fails the job at the sink, which names the first packet of the flow that
/// did not arrive, or, when only a flow's last packets were lost, leaves the input verified
/// short of its end, which the summary shows and `sluice bench pipeline` fails on.
pub fn udp_mq_between_engines(pipeline: &Pipeline, queues: usize) -> Result<EdgeSpec, AppError> {
    if pipeline.layout.packet > MAX_UDP_MQ_PACKET {
        return Err(AppError::BadSetting {
            key: "packet".into(),
            reason: format!(
                "{} bytes: a packet crossing udp-mq must fit one datagram, at most {MAX_UDP_MQ_PACKET} bytes (MAX_UDP_MQ_PACKET)",
                pipeline.layout.packet
            ),
        });
    }
    let params = UdpMqParams {
        queues,
        batch: UDP_MQ_BATCH,
        datagram_bytes: sluice_transport::datagram::MAX_DATAGRAM,
        queue_choice: QueueChoice::FlowHash,
        flow_key_bytes: data::FLOW_KEY_BYTES,
        socket_buffer_bytes: Some(UDP_MQ_SOCKET_BUFFER),
        ..UdpMqParams::default()
    };
    let transport = TransportSpec::UdpMq(params);
    transport.validate(1).map_err(|e| AppError::BadSetting {
        key: "queues".into(),
        reason: e.to_string(),
    })?;
    let (encode, decode) = pipeline.stage.operator_names();
    Ok(EdgeSpec {
        from: encode.into(),
        to: decode.into(),
        transport,
    })
}

/// The packet `FLOW:SEQ` names, which must be one of the input.
fn packet_in(layout: &Layout, text: &str) -> Result<(u32, u64), AppError> {
    let bad = |reason: String| AppError::BadSetting {
        key: "corrupt".into(),
        reason: format!("'{text}': {reason}"),
    };
    let (flow, seq) = text
        .split_once(':')
        .ok_or_else(|| bad("expected FLOW:SEQ, e.g. 0:3".into()))?;
    let flow: u32 = flow.trim().parse().map_err(|e| bad(format!("flow: {e}")))?;
    let seq: u64 = seq
        .trim()
        .parse()
        .map_err(|e| bad(format!("sequence number: {e}")))?;
    if flow >= layout.flows {
        return Err(bad(format!(
            "there are {} flows, numbered from 0",
            layout.flows
        )));
    }
    if layout.index(flow, seq).is_none() {
        let packets = layout.packets_of(flow);
        return Err(bad(format!(
            "flow {flow} has {packets} packet(s), numbered from 0"
        )));
    }
    Ok((flow, seq))
}

fn build_compress(config: &AppConfig) -> Result<App, AppError> {
    build(
        &Pipeline::from_settings(COMPRESS.name, &config.settings)?,
        config.rate,
    )
}

fn build_encrypt(config: &AppConfig) -> Result<App, AppError> {
    build(
        &Pipeline::from_settings(ENCRYPT.name, &config.settings)?,
        config.rate,
    )
}

/// The graph of `pipeline`, its senders paced at `rate` packets per second in all.
fn build(pipeline: &Pipeline, rate: Option<u64>) -> Result<App, AppError> {
    let p = pipeline.clone();
    let (encode, decode) = p.stage.operator_names();
    let flow = Dataflow::new(p.app());
    let generator = TextGenerator::new(p.layout.seed);
    flow.source_of::<PacketId, _, _>("packets", move |_| Packets {
        layout: p.layout,
        next: 0,
        pacer: Pacer::new(rate),
        batch: Vec::new(),
    })
    .key_by(|id: &PacketId| &id.flow)
    .stream()
    .map("generate", move |id: &PacketId| Packet {
        flow: id.flow,
        seq: id.seq,
        bytes: p
            .layout
            .index(id.flow, id.seq)
            .map_or_else(Vec::new, |index| {
                generator.packet(index, p.layout.len_of(index))
            }),
    })
    .parallelism(p.senders)
    .replicable(Partitioning::key_by(|id: &PacketId| id.flow))
    .process::<Packet, _, _>(encode, move |_| Encode {
        encoder: Encoder::new(p.stage, p.layout.seed),
        corrupt: p.corrupt,
        wire_bytes: 0,
    })
    .parallelism(p.senders)
    .replicable(by_flow())
    .key_by(|packet: &Packet| &packet.flow)
    .stream()
    .process::<Packet, _, _>(decode, move |_| Decode {
        decoder: Decoder::new(p.stage, p.layout.seed),
        layout: p.layout,
    })
    .parallelism(p.receivers)
    .replicable(by_flow())
    .sink("verify", move |_| Verify::new(p.layout))
    .parallelism(p.receivers)
    .replicable(by_flow());
    let p = pipeline.clone();
    let packets = p.layout.packets();
    Ok(
        App::new(flow.build()?, Box::new(move |report| summary(&p, report))).with_finite_input(
            "packets",
            Some(packets),
            "packets",
        ),
    )
}

/// Packets spread by flow: how every stage's input is spread when a replication optimizer
/// gives it more instances, so a flow's packets still meet one instance of each stage, in
/// order (every stage is stateless per packet; `verify` checks each flow's order).
fn by_flow() -> Partitioning {
    Partitioning::key_by(|packet: &Packet| packet.flow)
}

/// `N MB/s`: `bytes` over `seconds`, in decimal megabytes as the paper's figures.
pub fn mb_per_sec(bytes: u64, seconds: f64) -> f64 {
    bytes as f64 / seconds.max(1e-9) / 1e6
}

fn summary(p: &Pipeline, report: &JobReport) -> String {
    let (encode, _) = p.stage.operator_names();
    let verified = report.operator_report("verify").counters;
    let count = |name: &str| verified.get(name).copied().unwrap_or(0);
    let (packets, bytes) = (count(PACKETS_VERIFIED), count(BYTES_VERIFIED));
    let wire = report
        .operator_report(encode)
        .counters
        .get(WIRE_BYTES)
        .copied()
        .unwrap_or(0);
    let layout = &p.layout;
    let whole = if packets == layout.packets() {
        "the whole input"
    } else {
        "the run stopped before the end of the input"
    };
    let seconds = report.elapsed.as_secs_f64();
    [
        format!(
            "{}: {} bytes in {} packets of {} B over {} flows, {} sender(s) -> {} receiver(s)",
            p.app(),
            layout.size,
            layout.packets(),
            layout.packet,
            layout.flows,
            p.senders,
            p.receivers
        ),
        format!(
            "verified byte for byte: {packets} of {} packets, {bytes} bytes ({whole})",
            layout.packets()
        ),
        format!(
            "throughput: {:.1} MB/s of input ({bytes} bytes in {seconds:.3} s)",
            mb_per_sec(bytes, seconds)
        ),
        format!(
            "on the wire: {wire} bytes, {:.1}% of the bytes verified",
            100.0 * wire as f64 / bytes.max(1) as f64
        ),
        latency_line(report.latency().as_ref()),
    ]
    .join("\n")
}

/// The counter of packets the sink verified.
pub const PACKETS_VERIFIED: &str = "packets_verified";
/// The counter of bytes the sink verified.
pub const BYTES_VERIFIED: &str = "bytes_verified";
/// The counter of bytes the senders sent, compressed or encrypted.
pub const WIRE_BYTES: &str = "wire_bytes";

/// Packets the source hands out per `produce` call at most.
const PACKETS_PER_CALL: usize = 64;

/// Cuts the input: hands out the packets' ids in the input's order, paced.
struct Packets {
    layout: Layout,
    /// The index of the next packet.
    next: u64,
    pacer: Pacer,
    batch: Vec<PacketId>,
}

impl Source for Packets {
    fn produce(&mut self, out: &mut Output<'_>) -> Result<Produced, OperatorError> {
        let left = self.layout.packets() - self.next;
        if left == 0 {
            return Ok(Produced::Exhausted);
        }
        let allowed = self.pacer.allowance(PACKETS_PER_CALL).min(left as usize);
        if allowed == 0 {
            return Ok(Produced::Idle);
        }
        let first = self.next;
        self.next += allowed as u64;
        let ids = (first..self.next).map(|index| self.layout.id_of(index));
        self.batch.extend(ids);
        self.pacer.emitted(allowed);
        out.emit_batch(0, &mut self.batch)?;
        Ok(Produced::Emitted(allowed))
    }

    fn resumable(&self) -> bool {
        true
    }

    /// The index of the next packet: the input is made again from its seed, so its position
    /// is all a replay needs.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&self.next)
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.next = snapshot.decode_whole()?;
        Ok(())
    }
}

/// Compresses or encrypts each packet, and flips a byte of the one `corrupt` names.
struct Encode {
    encoder: Encoder,
    corrupt: Option<(u32, u64)>,
    wire_bytes: u64,
}

impl Operator for Encode {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let plain = expect_tuple::<Packet>(port, tuple)?;
        let mut wire = Vec::new();
        self.encoder
            .encode(plain.flow, plain.seq, &plain.bytes, &mut wire)
            .map_err(|e| OperatorError::Failed(format!("{}: {e}", plain.name())))?;
        if self.corrupt == Some((plain.flow, plain.seq)) {
            let middle = wire.len() / 2;
            if let Some(byte) = wire.get_mut(middle) {
                *byte ^= 0x20;
            }
        }
        self.wire_bytes += wire.len() as u64;
        out.emit(
            0,
            Packet {
                flow: plain.flow,
                seq: plain.seq,
                bytes: wire,
            },
        )
    }

    /// The bytes sent so far, which the summary reports.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&self.wire_bytes)
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        self.wire_bytes = snapshot.decode_whole()?;
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(counters(&[(WIRE_BYTES, self.wire_bytes)]))
    }
}

fn counters(values: &[(&str, u64)]) -> OperatorReport {
    OperatorReport {
        counters: values.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        ..OperatorReport::default()
    }
}

/// Decompresses or decrypts each packet, refusing one it cannot.
struct Decode {
    decoder: Decoder,
    layout: Layout,
}

impl Operator for Decode {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let wire = expect_tuple::<Packet>(port, tuple)?;
        let index = input_index(&self.layout, wire)?;
        let mut plain = Vec::new();
        self.decoder
            .decode(
                wire.flow,
                wire.seq,
                &wire.bytes,
                self.layout.len_of(index),
                &mut plain,
            )
            .map_err(|e| OperatorError::Failed(format!("{}: {e}", wire.name())))?;
        out.emit(
            0,
            Packet {
                flow: wire.flow,
                seq: wire.seq,
                bytes: plain,
            },
        )
    }
}

/// The index in the input of `packet`, or an error when the input has no such packet.
fn input_index(layout: &Layout, packet: &Packet) -> Result<u64, OperatorError> {
    layout.index(packet.flow, packet.seq).ok_or_else(|| {
        OperatorError::Failed(format!(
            "{}: the input has no such packet ({} packets over {} flows)",
            packet.name(),
            layout.packets(),
            layout.flows
        ))
    })
}

/// Checks each packet against the input made again from the seed, and each flow's order.
pub struct Verify {
    layout: Layout,
    generator: TextGenerator,
    /// The sequence number expected next, per flow.
    next: Vec<u64>,
    expected: Vec<u8>,
    packets: u64,
    bytes: u64,
}

impl Verify {
    /// A sink checking packets of the input `layout` describes.
    pub fn new(layout: Layout) -> Self {
        Self {
            layout,
            generator: TextGenerator::new(layout.seed),
            next: vec![0; layout.flows as usize],
            expected: Vec::new(),
            packets: 0,
            bytes: 0,
        }
    }

    /// Checks `packet`: the next of its flow, byte for byte the input's.
    pub fn check(&mut self, packet: &Packet) -> Result<(), String> {
        let fail = |what: String| format!("{}: {what}", packet.name());
        let index = input_index(&self.layout, packet).map_err(|e| e.to_string())?;
        let next = &mut self.next[packet.flow as usize];
        if packet.seq != *next {
            return Err(fail(format!(
                "arrived where packet {next} of the flow was expected (a packet is missing, repeated or out of order)"
            )));
        }
        self.generator
            .fill(index, self.layout.len_of(index), &mut self.expected);
        if packet.bytes.len() != self.expected.len() {
            return Err(fail(format!(
                "{} bytes where the input's packet has {}",
                packet.bytes.len(),
                self.expected.len()
            )));
        }
        if packet.bytes != self.expected {
            let at = packet
                .bytes
                .iter()
                .zip(&self.expected)
                .position(|(got, want)| got != want)
                .unwrap_or_default();
            return Err(fail(format!(
                "byte {at} of {} is {:#04x} where the input has {:#04x}",
                self.expected.len(),
                packet.bytes[at],
                self.expected[at]
            )));
        }
        *next += 1;
        self.packets += 1;
        self.bytes += packet.bytes.len() as u64;
        Ok(())
    }
}

impl Operator for Verify {
    fn process(
        &mut self,
        port: usize,
        tuple: TupleRef<'_>,
        _out: &mut Output<'_>,
    ) -> Result<(), OperatorError> {
        let packet = expect_tuple::<Packet>(port, tuple)?;
        self.check(packet).map_err(OperatorError::Failed)
    }

    /// The packet each flow expects next and what it verified so far.
    fn snapshot(&mut self) -> Result<Snapshot, OperatorError> {
        Snapshot::whole(&(&self.next, self.packets, self.bytes))
    }

    fn restore(&mut self, snapshot: Snapshot) -> Result<(), OperatorError> {
        (self.next, self.packets, self.bytes) = snapshot.decode_whole()?;
        Ok(())
    }

    fn stop(&mut self) -> Result<OperatorReport, OperatorError> {
        Ok(counters(&[
            (PACKETS_VERIFIED, self.packets),
            (BYTES_VERIFIED, self.bytes),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout {
            size: 10_000,
            packet: 1000,
            flows: 3,
            seed: 2,
        }
    }

    fn packet(flow: u32, seq: u64) -> Packet {
        let layout = layout();
        let index = layout.index(flow, seq).unwrap();
        Packet {
            flow,
            seq,
            bytes: TextGenerator::new(layout.seed).packet(index, layout.len_of(index)),
        }
    }

    #[test]
    fn the_sink_names_the_packet_and_what_is_wrong_with_it() {
        let mut sink = Verify::new(layout());
        sink.check(&packet(1, 0)).unwrap();
        sink.check(&packet(0, 0)).unwrap();
        let mut flipped = packet(1, 1);
        flipped.bytes[321] ^= 0x20;
        let e = sink.check(&flipped).unwrap_err();
        assert!(
            e.starts_with("flow 1 packet 1: byte 321 of 1000 is 0x"),
            "{e}"
        );
        let e = sink.check(&packet(1, 2)).unwrap_err();
        assert!(
            e.starts_with("flow 1 packet 2: arrived where packet 1 of the flow was expected"),
            "{e}"
        );
        let mut short = packet(1, 1);
        short.bytes.pop();
        let e = sink.check(&short).unwrap_err();
        assert_eq!(
            e,
            "flow 1 packet 1: 999 bytes where the input's packet has 1000"
        );
        let e = sink
            .check(&Packet {
                flow: 7,
                seq: 0,
                bytes: vec![],
            })
            .unwrap_err();
        assert_eq!(
            e,
            "flow 7 packet 0: the input has no such packet (10 packets over 3 flows)"
        );
        sink.check(&packet(1, 1)).unwrap();
        assert_eq!((sink.packets, sink.bytes), (3, 3000));
    }

    #[test]
    fn a_corrupt_packet_must_exist() {
        let parse = |text| packet_in(&layout(), text).map_err(|e| e.to_string());
        assert_eq!(parse("2:2"), Ok((2, 2)));
        assert!(parse("2:3").unwrap_err().contains("flow 2 has 3 packet(s)"));
        assert!(parse("3:0").unwrap_err().contains("there are 3 flows"));
        assert!(parse("1").unwrap_err().contains("expected FLOW:SEQ"));
        assert!(parse("x:1")
            .unwrap_err()
            .starts_with("setting corrupt: 'x:1': flow:"));
    }
}
