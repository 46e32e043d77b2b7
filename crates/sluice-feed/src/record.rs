//! Recording a feed to a file and replaying it, as the paper's feed senders replay prerecorded
//! OPRA data.
//!
//! # File format
//!
//! A 64-byte file header, then one record per packet, in send order. Integers are
//! little-endian; the two fractions are IEEE 754 doubles.
//!
//! ```text
//! file header:
//!  0                    8         10         12         16             20                24
//!  +--------------------+---------+----------+----------+--------------+-----------------+
//!  | magic "SLFEED\r\n"   | version | channels | flags    | underlyings  | series per      |
//!  |                    | u16 = 1 | u16      | u32      | u32          | underlying u32  |
//!  +--------------------+---------+----------+----------+--------------+-----------------+
//!  24               32               40               48         50         51        64
//!  +----------------+----------------+----------------+----------+----------+---------+
//!  | zipf exponent  | trade fraction | seed           | messages | exchanges| 0 ...   |
//!  | f64            | f64            | u64            | per pkt  | u8       |         |
//!  +----------------+----------------+----------------+----------+----------+---------+
//! record:
//!  0         2         4                  12
//!  +---------+---------+------------------+----------------------+
//!  | channel | length  | send offset (ns) | packet (length bytes)|
//!  | u16     | u16     | u64              | as `fast` encodes it |
//!  +---------+---------+------------------+----------------------+
//! ```
//!
//! Flag bit 0 says that bytes 16 to 51 hold the [`FeedConfig`] that generated the packets
//! ([`record_generated`] writes it; [`Replay::config`] reads it back, so a replay knows the
//! feed's shape, for a [`crate::Router`] say); without it they are 0. Other flag bits are 0.
//!
//! The send offset is the packet's send time from the start of the recording (the generator's
//! schedule at the recorded rate). [`Replay`] refuses a file without the magic, of another
//! version, with unknown flags or an invalid config, with a record whose channel is not below
//! the header's channel count, or that ends inside a record, naming the byte. It does not
//! decode the packets: a recording may hold corrupt packets on purpose (to test a feed
//! handler).

use std::fs::File;
use std::io::{BufReader, BufWriter, ErrorKind, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::send::{generated_slot, packet_interval_ns};
use crate::{Feed, FeedConfig, FeedError};

/// The first 8 bytes of a recording.
pub const RECORDING_MAGIC: [u8; 8] = *b"SLFEED\r\n";
/// The recording format's version.
pub const RECORDING_VERSION: u16 = 1;
/// Bytes of the file header.
pub const FILE_HEADER_BYTES: u64 = 64;
/// Flag bit 0: the header holds the generator's config.
const HAS_CONFIG: u32 = 1;
/// Bytes of a record's header, before the packet.
pub const RECORD_HEADER_BYTES: usize = 12;

/// Writes packets to a recording.
pub struct Recorder {
    path: PathBuf,
    writer: BufWriter<File>,
    channels: u16,
    packets: u64,
}

impl Recorder {
    /// Creates (or truncates) the recording `path` of a feed of `channels` channels.
    pub fn create(path: &Path, channels: usize) -> Result<Self, FeedError> {
        Self::create_with(path, channels, None)
    }

    /// Creates (or truncates) the recording `path` of the feed `config` generates, keeping the
    /// config in the file's header ([`Replay::config`]).
    pub fn create_for(path: &Path, config: &FeedConfig) -> Result<Self, FeedError> {
        config.validate()?;
        Self::create_with(path, config.channels, Some(config))
    }

    fn create_with(
        path: &Path,
        channels: usize,
        config: Option<&FeedConfig>,
    ) -> Result<Self, FeedError> {
        let channels = u16::try_from(channels)
            .ok()
            .filter(|&c| c > 0)
            .ok_or_else(|| {
                FeedError::Config(format!("channels must be 1 to 65,535, got {channels}"))
            })?;
        let context = || format!("create {}", path.display());
        let file = File::create(path).map_err(|e| FeedError::io(context(), e))?;
        let mut writer = BufWriter::new(file);
        let mut header = [0u8; FILE_HEADER_BYTES as usize];
        header[..8].copy_from_slice(&RECORDING_MAGIC);
        header[8..10].copy_from_slice(&RECORDING_VERSION.to_le_bytes());
        header[10..12].copy_from_slice(&channels.to_le_bytes());
        if let Some(c) = config {
            header[12..16].copy_from_slice(&HAS_CONFIG.to_le_bytes());
            header[16..20].copy_from_slice(&c.underlyings.to_le_bytes());
            header[20..24].copy_from_slice(&c.series_per_underlying.to_le_bytes());
            header[24..32].copy_from_slice(&c.zipf_exponent.to_le_bytes());
            header[32..40].copy_from_slice(&c.trade_fraction.to_le_bytes());
            header[40..48].copy_from_slice(&c.seed.to_le_bytes());
            header[48..50].copy_from_slice(&c.max_messages_per_packet.to_le_bytes());
            header[50] = c.exchanges;
        }
        writer
            .write_all(&header)
            .map_err(|e| FeedError::io(context(), e))?;
        Ok(Self {
            path: path.to_owned(),
            writer,
            channels,
            packets: 0,
        })
    }

    /// Appends `packet`, sent on `channel` at `send_offset_ns` from the start.
    pub fn record(
        &mut self,
        channel: usize,
        send_offset_ns: u64,
        packet: &[u8],
    ) -> Result<(), FeedError> {
        if channel >= usize::from(self.channels) {
            return Err(FeedError::Config(format!(
                "channel {channel} is not below the recording's {} channels",
                self.channels
            )));
        }
        let length = u16::try_from(packet.len()).map_err(|_| {
            FeedError::Config(format!(
                "a packet of {} bytes is longer than a record holds (65,535)",
                packet.len()
            ))
        })?;
        let mut header = [0u8; RECORD_HEADER_BYTES];
        header[..2].copy_from_slice(&(channel as u16).to_le_bytes());
        header[2..4].copy_from_slice(&length.to_le_bytes());
        header[4..].copy_from_slice(&send_offset_ns.to_le_bytes());
        self.writer
            .write_all(&header)
            .and_then(|()| self.writer.write_all(packet))
            .map_err(|e| FeedError::io(format!("write {}", self.path.display()), e))?;
        self.packets += 1;
        Ok(())
    }

    /// Flushes the file; returns how many packets it holds.
    pub fn finish(mut self) -> Result<u64, FeedError> {
        self.writer
            .flush()
            .map_err(|e| FeedError::io(format!("write {}", self.path.display()), e))?;
        Ok(self.packets)
    }
}

/// Records the first `packets` packets of the generated feed `config` to `path`, in the order
/// and with the send offsets the sender gives them at `rate_multiple`; returns the messages
/// they carry.
pub fn record_generated(
    config: &FeedConfig,
    path: &Path,
    packets: u64,
    rate_multiple: f64,
) -> Result<u64, FeedError> {
    let interval_ns = packet_interval_ns(rate_multiple)?;
    let mut feed = Feed::new(config)?;
    let mut recorder = Recorder::create_for(path, config)?;
    let mut packet = Vec::new();
    let mut messages = 0;
    for n in 0..packets {
        let (channel, send_offset_ns) = generated_slot(n, config.channels, interval_ns);
        messages += feed.next_packet(channel, 0, &mut packet) as u64;
        recorder.record(channel, send_offset_ns, &packet)?;
    }
    recorder.finish()?;
    Ok(messages)
}

/// A packet read back from a recording (its bytes go to the caller's buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplayedPacket {
    /// The channel it was sent on.
    pub channel: usize,
    /// When it was sent, from the start of the recording.
    pub send_offset_ns: u64,
}

/// Reads a recording back, packet by packet.
pub struct Replay {
    path: PathBuf,
    reader: BufReader<File>,
    channels: usize,
    config: Option<FeedConfig>,
    /// The file offset of the next record.
    at: u64,
}

impl Replay {
    /// Opens the recording `path`, checking its header.
    pub fn open(path: &Path) -> Result<Self, FeedError> {
        let file =
            File::open(path).map_err(|e| FeedError::io(format!("open {}", path.display()), e))?;
        let mut reader = BufReader::new(file);
        let mut header = [0u8; FILE_HEADER_BYTES as usize];
        let bad = |reason: String| FeedError::Recording {
            path: path.to_owned(),
            reason,
        };
        match read_full(&mut reader, &mut header) {
            Ok(true) => {}
            Ok(false) => {
                return Err(bad(format!(
                    "not a recorded feed: shorter than the {FILE_HEADER_BYTES}-byte header"
                )))
            }
            Err(e) => return Err(FeedError::io(format!("read {}", path.display()), e)),
        }
        if header[..8] != RECORDING_MAGIC {
            return Err(bad("not a recorded feed (no SLFEED magic)".into()));
        }
        let version = u16::from_le_bytes([header[8], header[9]]);
        if version != RECORDING_VERSION {
            return Err(bad(format!(
                "recording version {version}; this build reads version {RECORDING_VERSION}"
            )));
        }
        let channels = u16::from_le_bytes([header[10], header[11]]);
        if channels == 0 {
            return Err(bad("the header says 0 channels".into()));
        }
        let field = |at: usize| -> [u8; 8] { header[at..at + 8].try_into().unwrap_or_default() };
        let config = match u32::from_le_bytes([header[12], header[13], header[14], header[15]]) {
            0 => None,
            HAS_CONFIG => {
                let config = FeedConfig {
                    channels: channels.into(),
                    underlyings: u32::from_le_bytes([
                        header[16], header[17], header[18], header[19],
                    ]),
                    series_per_underlying: u32::from_le_bytes([
                        header[20], header[21], header[22], header[23],
                    ]),
                    zipf_exponent: f64::from_le_bytes(field(24)),
                    trade_fraction: f64::from_le_bytes(field(32)),
                    seed: u64::from_le_bytes(field(40)),
                    max_messages_per_packet: u16::from_le_bytes([header[48], header[49]]),
                    exchanges: header[50],
                };
                config
                    .validate()
                    .map_err(|e| bad(format!("the header's feed config: {e}")))?;
                Some(config)
            }
            flags => return Err(bad(format!("unknown flags {flags:#x} in the header"))),
        };
        Ok(Self {
            path: path.to_owned(),
            reader,
            channels: channels.into(),
            config,
            at: FILE_HEADER_BYTES,
        })
    }

    /// The feed's channels, as recorded.
    pub fn channels(&self) -> usize {
        self.channels
    }

    /// The config that generated the recording, if the header holds it.
    pub fn config(&self) -> Option<&FeedConfig> {
        self.config.as_ref()
    }

    /// Reads the next packet into `out` (cleared first); `None` at the end of the file.
    pub fn next_packet(&mut self, out: &mut Vec<u8>) -> Result<Option<ReplayedPacket>, FeedError> {
        out.clear();
        let mut header = [0u8; RECORD_HEADER_BYTES];
        let io = |e| FeedError::io(format!("read {}", self.path.display()), e);
        let mut first = [0u8; 1];
        // The end of the file is only clean between records.
        if self.reader.read(&mut first).map_err(io)? == 0 {
            return Ok(None);
        }
        header[0] = first[0];
        let whole = read_full(&mut self.reader, &mut header[1..]).map_err(io)?;
        let channel = usize::from(u16::from_le_bytes([header[0], header[1]]));
        let length = usize::from(u16::from_le_bytes([header[2], header[3]]));
        let send_offset_ns = u64::from_le_bytes(header[4..].try_into().unwrap_or_default());
        let bad = |reason: String| FeedError::Recording {
            path: self.path.clone(),
            reason,
        };
        if !whole {
            return Err(bad(format!(
                "the file ends inside the record at byte {}",
                self.at
            )));
        }
        if channel >= self.channels {
            return Err(bad(format!(
                "the record at byte {} is on channel {channel}, not below the file's {} channels",
                self.at, self.channels
            )));
        }
        out.resize(length, 0);
        if !read_full(&mut self.reader, out).map_err(io)? {
            out.clear();
            return Err(bad(format!(
                "the file ends inside the packet of the record at byte {}",
                self.at
            )));
        }
        self.at += (RECORD_HEADER_BYTES + length) as u64;
        Ok(Some(ReplayedPacket {
            channel,
            send_offset_ns,
        }))
    }

    /// Goes back to the first packet.
    pub fn rewind(&mut self) -> Result<(), FeedError> {
        self.seek(FILE_HEADER_BYTES)
    }

    /// Where the next packet's record starts in the file: a position to [`Replay::seek`]
    /// back to (a replaying source keeps it in its checkpoints).
    pub fn position(&self) -> u64 {
        self.at
    }

    /// Goes to the record at `position`, one [`Replay::position`] gave.
    pub fn seek(&mut self, position: u64) -> Result<(), FeedError> {
        if position < FILE_HEADER_BYTES {
            return Err(FeedError::Recording {
                path: self.path.clone(),
                reason: format!("position {position} is inside the file's header"),
            });
        }
        self.reader
            .seek(SeekFrom::Start(position))
            .map_err(|e| FeedError::io(format!("seek {}", self.path.display()), e))?;
        self.at = position;
        Ok(())
    }
}

/// Fills `buf`; `Ok(false)` if the file ended first.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    match reader.read_exact(buf) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::UnexpectedEof => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_recording_replays_the_same_packets_twice() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("feed.rec");
        let config = FeedConfig::default();
        let mut feed = Feed::new(&config).unwrap();
        let mut recorder = Recorder::create(&path, config.channels).unwrap();
        let mut sent = Vec::new();
        let mut packet = Vec::new();
        for i in 0..100u64 {
            let channel = (i % 4) as usize;
            feed.next_packet(channel, 0, &mut packet);
            recorder.record(channel, i * 1_000, &packet).unwrap();
            sent.push((channel, i * 1_000, packet.clone()));
        }
        assert_eq!(recorder.finish().unwrap(), 100);
        let mut replay = Replay::open(&path).unwrap();
        assert_eq!(replay.channels(), 4);
        assert_eq!(replay.config(), None);
        for _ in 0..2 {
            let mut read = Vec::new();
            while let Some(p) = replay.next_packet(&mut packet).unwrap() {
                read.push((p.channel, p.send_offset_ns, packet.clone()));
            }
            assert_eq!(read, sent);
            replay.rewind().unwrap();
        }
    }

    #[test]
    fn a_replay_seeks_back_to_a_position_it_gave() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("feed.rec");
        record_generated(&FeedConfig::default(), &path, 20, 1.0).unwrap();
        let mut replay = Replay::open(&path).unwrap();
        let mut packet = Vec::new();
        for _ in 0..7 {
            replay.next_packet(&mut packet).unwrap().unwrap();
        }
        let at = replay.position();
        let mut rest = |replay: &mut Replay| {
            let mut read = Vec::new();
            while let Some(p) = replay.next_packet(&mut packet).unwrap() {
                read.push((p, packet.clone()));
            }
            read
        };
        let first = rest(&mut replay);
        assert_eq!(first.len(), 13);
        let mut resumed = Replay::open(&path).unwrap();
        resumed.seek(at).unwrap();
        assert_eq!(rest(&mut resumed), first);
        let inside = resumed.seek(3).unwrap_err().to_string();
        assert!(
            inside.contains("position 3 is inside the file's header"),
            "{inside}"
        );
    }

    #[test]
    fn a_generated_recording_holds_the_senders_schedule() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("feed.rec");
        let config = FeedConfig::default();
        let config = FeedConfig {
            zipf_exponent: 1.25,
            trade_fraction: 0.5,
            seed: u64::MAX,
            ..config
        };
        let messages = record_generated(&config, &path, 10, 1.0).unwrap();
        let mut replay = Replay::open(&path).unwrap();
        assert_eq!(replay.config(), Some(&config));
        let mut packet = Vec::new();
        let mut counted = 0;
        let mut n = 0;
        while let Some(p) = replay.next_packet(&mut packet).unwrap() {
            assert_eq!(p.channel, n % 4);
            // 1x: 24,000 packets/s, one every 41,666 ns.
            assert_eq!(p.send_offset_ns, (n as u64 * 1_000_000_000) / 24_000);
            counted += u64::from(crate::fast::declared_count(&packet));
            n += 1;
        }
        assert_eq!((n, counted), (10, messages));
        let error = record_generated(&config, &path, 1, 0.0).unwrap_err();
        assert!(error.to_string().contains("rate multiple"), "{error}");
    }

    #[test]
    fn a_file_that_is_not_a_recording_or_is_cut_is_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        std::fs::write(&path, b"hello").unwrap();
        let error = Replay::open(&path).err().unwrap().to_string();
        assert!(
            error.ends_with("x: not a recorded feed: shorter than the 64-byte header"),
            "{error}"
        );
        std::fs::write(&path, [b'z'; 80]).unwrap();
        let error = Replay::open(&path).err().unwrap().to_string();
        assert!(
            error.ends_with("not a recorded feed (no SLFEED magic)"),
            "{error}"
        );

        let mut recorder = Recorder::create(&path, 2).unwrap();
        recorder.record(1, 7, &[1, 2, 3]).unwrap();
        assert!(recorder.record(2, 7, &[1]).is_err());
        recorder.finish().unwrap();
        let whole = std::fs::read(&path).unwrap();
        let mut bytes = whole.clone();
        bytes[8] = 2;
        std::fs::write(&path, &bytes).unwrap();
        let error = Replay::open(&path).err().unwrap().to_string();
        assert!(
            error.ends_with("recording version 2; this build reads version 1"),
            "{error}"
        );
        for cut in [whole.len() - 1, 70] {
            std::fs::write(&path, &whole[..cut]).unwrap();
            let mut replay = Replay::open(&path).unwrap();
            let error = replay.next_packet(&mut Vec::new()).unwrap_err().to_string();
            assert!(error.contains("the file ends inside"), "{error}");
            assert!(error.contains("record at byte 64"), "{error}");
        }
        bytes = whole.clone();
        bytes[12] = 2;
        std::fs::write(&path, &bytes).unwrap();
        let error = Replay::open(&path).err().unwrap().to_string();
        assert!(
            error.ends_with("unknown flags 0x2 in the header"),
            "{error}"
        );
        // A config of 0 underlyings.
        bytes[12] = 1;
        std::fs::write(&path, &bytes).unwrap();
        let error = Replay::open(&path).err().unwrap().to_string();
        assert!(
            error.contains("the header's feed config: invalid feed setting"),
            "{error}"
        );
        bytes = whole.clone();
        bytes[64] = 5;
        std::fs::write(&path, &bytes).unwrap();
        let mut replay = Replay::open(&path).unwrap();
        let error = replay.next_packet(&mut Vec::new()).unwrap_err().to_string();
        assert!(
            error.contains("on channel 5, not below the file's 2 channels"),
            "{error}"
        );
    }

    /// Reads every record of the file `bytes`; whatever they are, the reader returns records
    /// or an error, never panics, and never returns more records than the bytes can hold.
    fn replay_all(bytes: &[u8]) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r");
        std::fs::write(&path, bytes).unwrap();
        let Ok(mut replay) = Replay::open(&path) else {
            return;
        };
        let mut packet = Vec::new();
        let mut records = 0;
        while let Ok(Some(_)) = replay.next_packet(&mut packet) {
            records += 1;
            assert!(packet.len() <= bytes.len());
        }
        assert!(records <= bytes.len() / RECORD_HEADER_BYTES);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_file_is_read_or_refused_without_panic(
            tail in proptest::collection::vec(any::<u8>(), 0..300),
            flags in 0..3u8,
            channels in 0..3u8,
        ) {
            let mut bytes = vec![0u8; FILE_HEADER_BYTES as usize];
            bytes[..8].copy_from_slice(&RECORDING_MAGIC);
            bytes[8] = 1;
            bytes[10] = channels;
            bytes[12] = flags;
            bytes.extend_from_slice(&tail);
            replay_all(&bytes);
            replay_all(&tail);
        }
    }
}
