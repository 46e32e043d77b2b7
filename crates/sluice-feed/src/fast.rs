//! The FAST-style packet codec: an OPRA-like packet is a small fixed header followed by several
//! messages encoded as in FIX FAST 1.1 (templates, a presence map per message, stop-bit
//! integers, and the copy, increment and delta field operators over a dictionary).
//!
//! Written here rather than taken from a crate: the Rust FAST crates (`fastlib`, `fasters`,
//! `fefast`, `ironfix-fast`) are young or unmaintained, interpret XML templates into dynamic,
//! allocating messages, and some unwrap on malformed input, where this feed needs two fixed
//! templates decoded into a plain struct without allocation, a dictionary reset per packet,
//! and a decoder that refuses any byte string without panicking.
//!
//! # Packet layout
//!
//! Integers of the header are big-endian (network order):
//!
//! ```text
//!  0       2     3     4         6         8                16               24               32
//!  +-------+-----+-----+---------+---------+----------------+----------------+----------------+-----------
//!  | magic | ver |flags| channel | count   | packet_seq     | first_seq      | sent_ns        | messages..
//!  | "SF"  |  1  |  0  | u16     | u16     | u64            | u64            | u64            | (FAST)
//!  +-------+-----+-----+---------+---------+----------------+----------------+----------------+-----------
//! ```
//!
//! `count` messages follow, back to back, and nothing after them. Each message is:
//!
//! ```text
//!  +-------------+-------------+------------------------------------------------+
//!  | presence map| template id | the template's fields, in order                |
//!  | stop-bit    | uInt, copy  | (each: absent, or a stop-bit integer)          |
//!  +-------------+-------------+------------------------------------------------+
//! ```
//!
//! A stop-bit integer is a run of bytes carrying 7 bits each, most significant group first;
//! the last byte has its top bit (the stop bit) set. A signed integer is two's complement, its
//! sign the second-highest bit of the first byte. The presence map is a stop-bit run of bits,
//! one for each field whose operator needs one, in template order, the template id's first.
//!
//! # Templates
//!
//! | field | quote (id 1) | trade (id 2) | operator | dictionary key |
//! |---|---|---|---|---|
//! | seq | yes | yes | increment (bit) | `seq` |
//! | underlying | yes | yes | copy (bit) | `underlying` |
//! | series | yes | yes | delta (signed, always present) | `series` |
//! | exchange | yes | yes | copy (bit) | `exchange` |
//! | bid_price | yes | | delta | `price` |
//! | bid_size | yes | | copy (bit) | `size` |
//! | ask_price | yes | | delta | `price` |
//! | ask_size | yes | | copy (bit) | `size` |
//! | trade_price | | yes | delta | `price` |
//! | trade_size | | yes | copy (bit) | `size` |
//!
//! The prices share one dictionary entry (as FAST's `key` attribute allows), so an ask is coded
//! as its spread over the bid just before it, and a bid as its distance from the previous
//! message's ask: a byte or two where the price itself takes three or four. The sizes share one
//! too, so equal bid and ask sizes cost nothing. Copy and increment fields cost no byte when
//! they repeat (increment: the previous plus one), which is how `seq` usually costs nothing.
//! A quote's trade fields and a trade's quote fields are not coded: they decode as 0.
//!
//! Deltas of the 64-bit prices are taken modulo 2^64 (two's complement), so every `u64`
//! round-trips; deltas of narrower fields must land inside the field's range when decoded.
//! The constant and default operators are not used: no field of these messages is constant,
//! and a default would never pay where copy does.
//!
//! # One packet decodes on its own
//!
//! The dictionary is reset at the start of every packet, as OPRA does, so a lost packet never
//! corrupts the next: the first message of a packet carries its template id, seq, underlying,
//! exchange and size, and its deltas start from 0.
//!
//! # How many messages a packet carries
//!
//! Several: a FAST packet carries a block of messages (the paper, V.C.2: the feed handler
//! decodes a packet, then processes its messages in sequence, and all of them carry the
//! packet's arrival stamp). [`crate::FeedConfig::max_messages_per_packet`] sets the most
//! (default 8; each packet draws from 1 to that, so 4.5 on average), and
//! [`crate::FeedConfig::validate`] keeps it such that even the worst-case packet
//! ([`HEADER_BYTES`] + max x [`MAX_MESSAGE_BYTES`]) fits a 1,500-byte Ethernet MTU less the IP
//! and UDP headers ([`MTU_PAYLOAD_BYTES`]). A message of the default feed takes 13 bytes on
//! average (the first of a packet more: it carries every copied field and whole prices), and
//! a packet 90 bytes with its header.
//!
//! Why a few: the paper gives its rates in packets and says a packet carries several messages,
//! not how many. A few (4.5 on average) puts 1x (24,000 packets/s) at about 108,000 messages/s,
//! and keeps modest the wait the paper measures inside a feed handler, where a packet's later
//! messages queue behind its earlier ones (V.C.2); raise the setting to study that effect.
//!
//! # Robustness
//!
//! [`decode_packet`] refuses, with a [`DecodeError`] that says what and at which byte, a
//! packet shorter than its header, a wrong magic, version or flags, a stop-bit integer that
//! overflows 64 bits or runs off the end, an unknown template, a presence map longer than any
//! template needs or with bits no field uses, a copy or increment with no previous value, a
//! value outside its field's range, a count that disagrees with the bytes (too few messages,
//! or bytes after the last), and a first message whose seq is not the header's `first_seq`.
//! It never panics and allocates nothing sized by the input (only `out` grows, one message per
//! decoded message).

/// The first two bytes of every packet.
pub const PACKET_MAGIC: [u8; 2] = *b"SF";
/// The packet layout's version, byte 2.
pub const PACKET_VERSION: u8 = 1;
/// Bytes of the fixed header before the messages.
pub const HEADER_BYTES: usize = 32;
/// The most bytes one message can take: a 1-byte presence map, the template id (1 byte), seq
/// (10), underlying (5), series (5), exchange (2), and two prices (10 each) and two sizes (5
/// each).
pub const MAX_MESSAGE_BYTES: usize = 1 + 1 + 10 + 5 + 5 + 2 + 2 * (10 + 5);
/// The largest UDP payload that fits a 1,500-byte Ethernet MTU: less 20 bytes of IPv4 header
/// and 8 of UDP header.
pub const MTU_PAYLOAD_BYTES: usize = 1_500 - 20 - 8;
/// The template id of quotes.
pub const QUOTE_TEMPLATE: u64 = 1;
/// The template id of trades.
pub const TRADE_TEMPLATE: u64 = 2;

/// The longest presence map accepted, in bytes (the templates need one).
const MAX_PRESENCE_MAP_BYTES: usize = 2;
/// Bytes of the longest stop-bit integer of 64 bits.
const MAX_INTEGER_BYTES: usize = 10;
/// Where `sent_ns` sits in the header.
const SENT_NS_AT: usize = 24;

/// Quote or trade.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MessageKind {
    /// A new best bid and offer of one series on one exchange.
    Quote,
    /// A trade in one series on one exchange.
    Trade,
}

/// One OPRA-style options message, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// Quote or trade.
    pub kind: MessageKind,
    /// The message's sequence number within its channel: 1, 2, 3, ... without gaps as
    /// generated.
    pub seq: u64,
    /// The index of the underlying symbol; 0 is the most popular (its Zipf rank).
    pub underlying: u32,
    /// The option series, unique in the feed (an underlying has many: strikes x expiries x
    /// put/call).
    pub series: u32,
    /// The participant exchange.
    pub exchange: u8,
    /// Quotes: the bid, in 1/10,000 of a dollar; 0 in trades.
    pub bid_price: u64,
    /// Quotes: contracts bid; 0 in trades.
    pub bid_size: u32,
    /// Quotes: the offer, in 1/10,000 of a dollar; 0 in trades.
    pub ask_price: u64,
    /// Quotes: contracts offered; 0 in trades.
    pub ask_size: u32,
    /// Trades: the price, in 1/10,000 of a dollar; 0 in quotes.
    pub trade_price: u64,
    /// Trades: contracts traded; 0 in quotes.
    pub trade_size: u32,
}

impl Message {
    /// A message of `kind` with every field 0.
    pub fn zeroed(kind: MessageKind) -> Self {
        Self {
            kind,
            seq: 0,
            underlying: 0,
            series: 0,
            exchange: 0,
            bid_price: 0,
            bid_size: 0,
            ask_price: 0,
            ask_size: 0,
            trade_price: 0,
            trade_size: 0,
        }
    }
}

/// What a packet says about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PacketHeader {
    /// The channel that carried it.
    pub channel: u16,
    /// The packet's sequence number within its channel: 1, 2, 3, ...
    pub packet_seq: u64,
    /// The seq of its first message (its messages are numbered from there on).
    pub first_seq: u64,
    /// How many messages it carries.
    pub count: u16,
    /// When it was sent: `sluice_types::monotonic_ns()` of the sender.
    pub sent_ns: u64,
}

/// Why a packet could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeProblem {
    /// Fewer bytes than the fixed header.
    #[error("a packet of {len} bytes is shorter than the {HEADER_BYTES}-byte header")]
    TooShort {
        /// The packet's length.
        len: usize,
    },
    /// The first two bytes are not [`PACKET_MAGIC`].
    #[error("bad magic {0:02x?}, not a feed packet")]
    BadMagic([u8; 2]),
    /// A layout version this decoder does not know.
    #[error("unsupported packet version {0} (this decoder reads {PACKET_VERSION})")]
    UnsupportedVersion(u8),
    /// The flags byte is not 0.
    #[error("unknown flags {0:#04x}")]
    UnknownFlags(u8),
    /// The packet ends inside a field.
    #[error("the packet ends inside a stop-bit field")]
    Truncated,
    /// A stop-bit integer does not fit 64 bits.
    #[error("a stop-bit integer overflows 64 bits")]
    IntegerOverflow,
    /// A presence map longer than any template needs.
    #[error("a presence map longer than {MAX_PRESENCE_MAP_BYTES} bytes")]
    PresenceMapTooLong,
    /// A presence map with bits set that no field of the template uses.
    #[error("a presence map has bits set that no field of the template uses")]
    UnusedPresenceBits,
    /// A template id that is neither a quote's nor a trade's.
    #[error("unknown template id {0}")]
    UnknownTemplate(u64),
    /// A copy or increment field absent from the presence map with no previous value in the
    /// packet.
    #[error("{0} is absent and has no previous value in the packet")]
    MissingValue(&'static str),
    /// A value outside its field's range.
    #[error("{0} is out of range")]
    OutOfRange(&'static str),
    /// The bytes end before the header's count of messages.
    #[error("the packet holds {decoded} messages where its header says {declared}")]
    FewerMessages {
        /// The header's count.
        declared: u16,
        /// Messages the bytes held.
        decoded: u16,
    },
    /// Bytes follow the header's count of messages.
    #[error("{extra} bytes follow the {declared} messages the header declares")]
    TrailingBytes {
        /// The header's count.
        declared: u16,
        /// Bytes left over.
        extra: usize,
    },
    /// The first message's seq is not the header's `first_seq`.
    #[error("the first message has seq {message} where the header says {header}")]
    FirstSeqMismatch {
        /// The header's `first_seq`.
        header: u64,
        /// The first message's seq.
        message: u64,
    },
}

/// A packet the decoder refused: what was wrong, at which byte, in which message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{problem} (byte {offset}{})", message.map(|m| format!(", message {m}")).unwrap_or_default())]
pub struct DecodeError {
    /// What was wrong.
    pub problem: DecodeProblem,
    /// The byte offset in the packet where it was found.
    pub offset: usize,
    /// The index of the message being decoded, if the fault is inside one.
    pub message: Option<u16>,
}

/// The fields of a message, as the templates name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Seq,
    Underlying,
    Series,
    Exchange,
    BidPrice,
    BidSize,
    AskPrice,
    AskSize,
    TradePrice,
    TradeSize,
}

/// The field operators used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    /// Present (with a bit): the value; absent: the previous value.
    Copy,
    /// Present (with a bit): the value; absent: the previous value plus one.
    Increment,
    /// Always present, no bit: a signed difference from the previous value (0 when none).
    Delta,
}

/// The dictionary entries; fields sharing a key share an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Seq,
    Underlying,
    Series,
    Exchange,
    Price,
    Size,
}

const KEYS: usize = 6;

impl Field {
    fn name(self) -> &'static str {
        match self {
            Field::Seq => "seq",
            Field::Underlying => "underlying",
            Field::Series => "series",
            Field::Exchange => "exchange",
            Field::BidPrice => "bid_price",
            Field::BidSize => "bid_size",
            Field::AskPrice => "ask_price",
            Field::AskSize => "ask_size",
            Field::TradePrice => "trade_price",
            Field::TradeSize => "trade_size",
        }
    }

    fn key(self) -> Key {
        match self {
            Field::Seq => Key::Seq,
            Field::Underlying => Key::Underlying,
            Field::Series => Key::Series,
            Field::Exchange => Key::Exchange,
            Field::BidPrice | Field::AskPrice | Field::TradePrice => Key::Price,
            Field::BidSize | Field::AskSize | Field::TradeSize => Key::Size,
        }
    }

    /// The largest value the field holds.
    fn max(self) -> u64 {
        match self {
            Field::Seq | Field::BidPrice | Field::AskPrice | Field::TradePrice => u64::MAX,
            Field::Underlying
            | Field::Series
            | Field::BidSize
            | Field::AskSize
            | Field::TradeSize => u32::MAX.into(),
            Field::Exchange => u8::MAX.into(),
        }
    }

    fn get(self, m: &Message) -> u64 {
        match self {
            Field::Seq => m.seq,
            Field::Underlying => m.underlying.into(),
            Field::Series => m.series.into(),
            Field::Exchange => m.exchange.into(),
            Field::BidPrice => m.bid_price,
            Field::BidSize => m.bid_size.into(),
            Field::AskPrice => m.ask_price,
            Field::AskSize => m.ask_size.into(),
            Field::TradePrice => m.trade_price,
            Field::TradeSize => m.trade_size.into(),
        }
    }

    /// Sets the field; `value` is at most [`Field::max`] (the decoder checks).
    fn set(self, m: &mut Message, value: u64) {
        let narrow = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        match self {
            Field::Seq => m.seq = value,
            Field::Underlying => m.underlying = narrow(value),
            Field::Series => m.series = narrow(value),
            Field::Exchange => m.exchange = u8::try_from(value).unwrap_or(u8::MAX),
            Field::BidPrice => m.bid_price = value,
            Field::BidSize => m.bid_size = narrow(value),
            Field::AskPrice => m.ask_price = value,
            Field::AskSize => m.ask_size = narrow(value),
            Field::TradePrice => m.trade_price = value,
            Field::TradeSize => m.trade_size = narrow(value),
        }
    }
}

/// A template: its id, the kind of message, and its fields with their operators.
struct Template {
    id: u64,
    kind: MessageKind,
    fields: &'static [(Field, Operator)],
}

impl Template {
    /// Presence-map bits the template uses, the template id's included.
    fn presence_bits(&self) -> u32 {
        1 + self
            .fields
            .iter()
            .filter(|(_, op)| *op != Operator::Delta)
            .count() as u32
    }
}

const QUOTE: Template = Template {
    id: QUOTE_TEMPLATE,
    kind: MessageKind::Quote,
    fields: &[
        (Field::Seq, Operator::Increment),
        (Field::Underlying, Operator::Copy),
        (Field::Series, Operator::Delta),
        (Field::Exchange, Operator::Copy),
        (Field::BidPrice, Operator::Delta),
        (Field::BidSize, Operator::Copy),
        (Field::AskPrice, Operator::Delta),
        (Field::AskSize, Operator::Copy),
    ],
};

const TRADE: Template = Template {
    id: TRADE_TEMPLATE,
    kind: MessageKind::Trade,
    fields: &[
        (Field::Seq, Operator::Increment),
        (Field::Underlying, Operator::Copy),
        (Field::Series, Operator::Delta),
        (Field::Exchange, Operator::Copy),
        (Field::TradePrice, Operator::Delta),
        (Field::TradeSize, Operator::Copy),
    ],
};

fn template_of(kind: MessageKind) -> &'static Template {
    match kind {
        MessageKind::Quote => &QUOTE,
        MessageKind::Trade => &TRADE,
    }
}

/// The per-packet dictionary: the previous value of each key, `None` until the packet sets it.
#[derive(Default)]
struct Dictionary {
    template: Option<u64>,
    values: [Option<u64>; KEYS],
}

impl Dictionary {
    fn get(&self, key: Key) -> Option<u64> {
        self.values[key as usize]
    }

    fn set(&mut self, key: Key, value: u64) {
        self.values[key as usize] = Some(value);
    }
}

/// Appends `value` as a stop-bit unsigned integer.
fn put_uint(out: &mut Vec<u8>, value: u64) {
    let groups = ((64 - value.leading_zeros()).max(1)).div_ceil(7);
    for g in (0..groups).rev() {
        let byte = ((value >> (7 * g)) & 0x7f) as u8;
        out.push(if g == 0 { byte | 0x80 } else { byte });
    }
}

/// Appends `value` as a stop-bit signed (two's complement) integer.
fn put_int(out: &mut Vec<u8>, value: i64) {
    // Bits needed including the sign: the significant bits of the value or its complement.
    let magnitude = if value < 0 { !value } else { value };
    let bits = 64 - magnitude.leading_zeros() + 1;
    let groups = bits.div_ceil(7);
    for g in (0..groups).rev() {
        let byte = ((value >> (7 * g).min(63)) & 0x7f) as u8;
        out.push(if g == 0 { byte | 0x80 } else { byte });
    }
}

/// Writes the header; `count` and `first_seq` are those given.
fn put_header(out: &mut Vec<u8>, header: &PacketHeader) {
    out.extend_from_slice(&PACKET_MAGIC);
    out.push(PACKET_VERSION);
    out.push(0);
    out.extend_from_slice(&header.channel.to_be_bytes());
    out.extend_from_slice(&header.count.to_be_bytes());
    out.extend_from_slice(&header.packet_seq.to_be_bytes());
    out.extend_from_slice(&header.first_seq.to_be_bytes());
    out.extend_from_slice(&header.sent_ns.to_be_bytes());
}

/// Encodes a packet of `messages` into `out` (cleared first). The header's `count` and
/// `first_seq` are taken from `messages` (their number, and the first one's seq; the header's
/// `first_seq` when there are none); its other fields as given. Each message is coded with its
/// kind's template; fields the template does not carry are dropped (they decode as 0).
///
/// # Panics
///
/// If `messages` holds more than 65,535 messages (the header's count is 16 bits): a caller's
/// bug, not something a peer sends.
pub fn encode_packet(header: &PacketHeader, messages: &[Message], out: &mut Vec<u8>) {
    let count = u16::try_from(messages.len()).expect("at most 65,535 messages per packet");
    out.clear();
    put_header(
        out,
        &PacketHeader {
            count,
            first_seq: messages.first().map_or(header.first_seq, |m| m.seq),
            ..*header
        },
    );
    let mut dictionary = Dictionary::default();
    for message in messages {
        encode_message(message, &mut dictionary, out);
    }
}

fn encode_message(message: &Message, dictionary: &mut Dictionary, out: &mut Vec<u8>) {
    let template = template_of(message.kind);
    // Every template needs at most 7 presence bits: the map is one byte, patched at the end.
    let map_at = out.len();
    out.push(0);
    let mut map = PresenceMapWriter::default();
    let template_present = dictionary.template != Some(template.id);
    map.push(template_present);
    if template_present {
        put_uint(out, template.id);
        dictionary.template = Some(template.id);
    }
    for &(field, operator) in template.fields {
        let value = field.get(message);
        let key = field.key();
        let previous = dictionary.get(key);
        match operator {
            Operator::Copy | Operator::Increment => {
                let implied = match operator {
                    Operator::Increment => previous.and_then(|p| p.checked_add(1)),
                    _ => previous,
                };
                let present = implied != Some(value);
                map.push(present);
                if present {
                    put_uint(out, value);
                }
            }
            Operator::Delta => {
                put_int(out, value.wrapping_sub(previous.unwrap_or(0)) as i64);
            }
        }
        dictionary.set(key, value);
    }
    out[map_at] = map.byte();
}

/// A one-byte presence map being written: up to 7 bits, the first the highest.
#[derive(Default)]
struct PresenceMapWriter {
    bits: u8,
    len: u32,
}

impl PresenceMapWriter {
    fn push(&mut self, present: bool) {
        if present {
            self.bits |= 0x40 >> self.len;
        }
        self.len += 1;
    }

    /// The map's byte, stop bit set.
    fn byte(&self) -> u8 {
        self.bits | 0x80
    }
}

/// Overwrites the `sent_ns` of an encoded packet's header (the sender stamps it just before
/// the send). Returns `false`, changing nothing, if `packet` is shorter than the header.
pub fn stamp_sent_ns(packet: &mut [u8], sent_ns: u64) -> bool {
    match packet.get_mut(SENT_NS_AT..SENT_NS_AT + 8) {
        Some(field) => {
            field.copy_from_slice(&sent_ns.to_be_bytes());
            true
        }
        None => false,
    }
}

/// The message count an encoded packet's header declares (0 if `packet` is shorter than the
/// header); nothing else is checked.
pub fn declared_count(packet: &[u8]) -> u16 {
    match packet.get(6..8) {
        Some(&[high, low]) if packet.len() >= HEADER_BYTES => u16::from_be_bytes([high, low]),
        _ => 0,
    }
}

/// Reads the bytes of one packet.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, DecodeProblem> {
        let byte = *self.bytes.get(self.at).ok_or(DecodeProblem::Truncated)?;
        self.at += 1;
        Ok(byte)
    }

    fn uint(&mut self) -> Result<u64, DecodeProblem> {
        let mut value = 0u64;
        for _ in 0..MAX_INTEGER_BYTES {
            let byte = self.byte()?;
            if value >> 57 != 0 {
                return Err(DecodeProblem::IntegerOverflow);
            }
            value = (value << 7) | u64::from(byte & 0x7f);
            if byte & 0x80 != 0 {
                return Ok(value);
            }
        }
        Err(DecodeProblem::IntegerOverflow)
    }

    fn int(&mut self) -> Result<i64, DecodeProblem> {
        let first = self.byte()?;
        let mut value: i64 = if first & 0x40 != 0 { -1 } else { 0 };
        let mut byte = first;
        for _ in 0..MAX_INTEGER_BYTES {
            // The shift keeps the value only if its top 8 bits are all sign.
            if !(-(1i64 << 56)..(1i64 << 56)).contains(&value) {
                return Err(DecodeProblem::IntegerOverflow);
            }
            value = (value << 7) | i64::from(byte & 0x7f);
            if byte & 0x80 != 0 {
                return Ok(value);
            }
            byte = self.byte()?;
        }
        Err(DecodeProblem::IntegerOverflow)
    }

    /// The presence map's bits, first bit highest, and how many there are.
    fn presence_map(&mut self) -> Result<(u32, u32), DecodeProblem> {
        let mut bits = 0u32;
        for n in 1..=MAX_PRESENCE_MAP_BYTES as u32 {
            let byte = self.byte()?;
            bits = (bits << 7) | u32::from(byte & 0x7f);
            if byte & 0x80 != 0 {
                return Ok((bits, 7 * n));
            }
        }
        Err(DecodeProblem::PresenceMapTooLong)
    }

    fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut array = [0; N];
        array.copy_from_slice(&self.bytes[self.at..self.at + N]);
        self.at += N;
        array
    }
}

/// Decodes one packet into `out` (cleared first) and returns its header. Refuses anything but
/// a well-formed packet with a [`DecodeError`] (the module docs list the checks); `out` is then
/// empty. Never panics, whatever the bytes.
pub fn decode_packet(bytes: &[u8], out: &mut Vec<Message>) -> Result<PacketHeader, DecodeError> {
    out.clear();
    let result = decode_into(bytes, out);
    if result.is_err() {
        out.clear();
    }
    result
}

fn decode_into(bytes: &[u8], out: &mut Vec<Message>) -> Result<PacketHeader, DecodeError> {
    let at = |offset: usize, problem: DecodeProblem| DecodeError {
        problem,
        offset,
        message: None,
    };
    if bytes.len() < HEADER_BYTES {
        return Err(at(0, DecodeProblem::TooShort { len: bytes.len() }));
    }
    let mut reader = Reader { bytes, at: 0 };
    let magic = reader.array::<2>();
    if magic != PACKET_MAGIC {
        return Err(at(0, DecodeProblem::BadMagic(magic)));
    }
    let [version, flags] = reader.array::<2>();
    if version != PACKET_VERSION {
        return Err(at(2, DecodeProblem::UnsupportedVersion(version)));
    }
    if flags != 0 {
        return Err(at(3, DecodeProblem::UnknownFlags(flags)));
    }
    let header = PacketHeader {
        channel: u16::from_be_bytes(reader.array()),
        count: u16::from_be_bytes(reader.array()),
        packet_seq: u64::from_be_bytes(reader.array()),
        first_seq: u64::from_be_bytes(reader.array()),
        sent_ns: u64::from_be_bytes(reader.array()),
    };
    let mut dictionary = Dictionary::default();
    for index in 0..header.count {
        if reader.at == bytes.len() {
            return Err(at(
                reader.at,
                DecodeProblem::FewerMessages {
                    declared: header.count,
                    decoded: index,
                },
            ));
        }
        let start = reader.at;
        let message =
            decode_message(&mut reader, &mut dictionary).map_err(|problem| DecodeError {
                problem,
                offset: reader.at,
                message: Some(index),
            })?;
        if index == 0 && message.seq != header.first_seq {
            return Err(DecodeError {
                problem: DecodeProblem::FirstSeqMismatch {
                    header: header.first_seq,
                    message: message.seq,
                },
                offset: start,
                message: Some(0),
            });
        }
        out.push(message);
    }
    if reader.at != bytes.len() {
        return Err(at(
            reader.at,
            DecodeProblem::TrailingBytes {
                declared: header.count,
                extra: bytes.len() - reader.at,
            },
        ));
    }
    Ok(header)
}

fn decode_message(
    reader: &mut Reader<'_>,
    dictionary: &mut Dictionary,
) -> Result<Message, DecodeProblem> {
    let (map, map_bits) = reader.presence_map()?;
    let mut bit = 0;
    let mut next_bit = || {
        let set = bit < map_bits && (map >> (map_bits - 1 - bit)) & 1 == 1;
        bit += 1;
        set
    };
    let template_id = if next_bit() {
        reader.uint()?
    } else {
        dictionary
            .template
            .ok_or(DecodeProblem::MissingValue("template id"))?
    };
    let template = match template_id {
        QUOTE_TEMPLATE => &QUOTE,
        TRADE_TEMPLATE => &TRADE,
        unknown => return Err(DecodeProblem::UnknownTemplate(unknown)),
    };
    dictionary.template = Some(template.id);
    let mut message = Message::zeroed(template.kind);
    for &(field, operator) in template.fields {
        let key = field.key();
        let previous = dictionary.get(key);
        let value = match operator {
            Operator::Copy | Operator::Increment => {
                if next_bit() {
                    reader.uint()?
                } else {
                    let previous = previous.ok_or(DecodeProblem::MissingValue(field.name()))?;
                    if operator == Operator::Increment {
                        previous
                            .checked_add(1)
                            .ok_or(DecodeProblem::OutOfRange(field.name()))?
                    } else {
                        previous
                    }
                }
            }
            Operator::Delta => {
                let delta = reader.int()?;
                let base = previous.unwrap_or(0);
                if field.max() == u64::MAX {
                    base.wrapping_add(delta as u64)
                } else {
                    // Narrow fields: base <= u32::MAX, so the sum cannot overflow i64.
                    u64::try_from(base as i64 + delta)
                        .map_err(|_| DecodeProblem::OutOfRange(field.name()))?
                }
            }
        };
        if value > field.max() {
            return Err(DecodeProblem::OutOfRange(field.name()));
        }
        field.set(&mut message, value);
        dictionary.set(key, value);
    }
    let used = template.presence_bits();
    if used < map_bits && map & ((1 << (map_bits - used)) - 1) != 0 {
        return Err(DecodeProblem::UnusedPresenceBits);
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn uint_bytes(value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_uint(&mut out, value);
        out
    }

    fn int_bytes(value: i64) -> Vec<u8> {
        let mut out = Vec::new();
        put_int(&mut out, value);
        out
    }

    fn read<'a, T>(bytes: &'a [u8], f: impl FnOnce(&mut Reader<'a>) -> T) -> T {
        f(&mut Reader { bytes, at: 0 })
    }

    #[test]
    fn stop_bit_integers_match_the_fast_specification_examples() {
        // FAST 1.1, section 10.6.1 and appendix 3's integer examples.
        assert_eq!(uint_bytes(0), [0x80]);
        assert_eq!(uint_bytes(1), [0x81]);
        assert_eq!(uint_bytes(942_755), [0x39, 0x45, 0xa3]);
        assert_eq!(int_bytes(942_755), [0x39, 0x45, 0xa3]);
        assert_eq!(int_bytes(-942_755), [0x46, 0x3a, 0xdd]);
        assert_eq!(int_bytes(-7_942_755), [0x7c, 0x1b, 0x1b, 0x9d]);
        assert_eq!(int_bytes(8_193), [0x00, 0x40, 0x81]);
        assert_eq!(int_bytes(-8_193), [0x7f, 0x3f, 0xff]);
        assert_eq!(int_bytes(64), [0x00, 0xc0]);
        assert_eq!(int_bytes(-64), [0xc0]);
    }

    #[test]
    fn extreme_integers_round_trip_and_overflow_is_refused() {
        for value in [0, 1, 127, 128, u64::MAX >> 1, u64::MAX] {
            let bytes = uint_bytes(value);
            assert_eq!(read(&bytes, Reader::uint), Ok(value), "{value}");
        }
        for value in [0, -1, 63, -64, 64, -65, i64::MAX, i64::MIN] {
            let bytes = int_bytes(value);
            assert_eq!(read(&bytes, Reader::int), Ok(value), "{value}");
        }
        // 2^64 and 2^63 (as signed): one bit too many.
        let too_big = [0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0x80];
        assert_eq!(
            read(&too_big, Reader::uint),
            Err(DecodeProblem::IntegerOverflow)
        );
        let too_big_signed = [0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x80];
        assert_eq!(
            read(&too_big_signed, Reader::int),
            Err(DecodeProblem::IntegerOverflow)
        );
        assert_eq!(
            read(&[0u8; 11], Reader::uint),
            Err(DecodeProblem::IntegerOverflow)
        );
        assert_eq!(
            read(&[0x01, 0x02], Reader::uint),
            Err(DecodeProblem::Truncated)
        );
        assert_eq!(
            read(&[0x01, 0x02], Reader::int),
            Err(DecodeProblem::Truncated)
        );
    }

    fn quote(seq: u64, series: u32, bid: u64) -> Message {
        Message {
            seq,
            underlying: 3,
            series,
            exchange: 2,
            bid_price: bid,
            bid_size: 10,
            ask_price: bid + 200,
            ask_size: 10,
            ..Message::zeroed(MessageKind::Quote)
        }
    }

    fn packet(messages: &[Message]) -> Vec<u8> {
        let header = PacketHeader {
            channel: 2,
            packet_seq: 7,
            sent_ns: 99,
            ..PacketHeader::default()
        };
        let mut out = Vec::new();
        encode_packet(&header, messages, &mut out);
        out
    }

    #[test]
    fn a_packet_round_trips_and_repeated_fields_cost_nothing() {
        let trade = Message {
            seq: 12,
            underlying: 3,
            series: 41,
            exchange: 2,
            trade_price: 10_300,
            trade_size: 5,
            ..Message::zeroed(MessageKind::Trade)
        };
        let messages = [quote(10, 40, 10_000), quote(11, 41, 10_100), trade];
        let bytes = packet(&messages);
        let mut decoded = Vec::new();
        let header = decode_packet(&bytes, &mut decoded).unwrap();
        assert_eq!(
            header,
            PacketHeader {
                channel: 2,
                packet_seq: 7,
                first_seq: 10,
                count: 3,
                sent_ns: 99
            }
        );
        assert_eq!(decoded, messages);
        let first_quote = [
            0xfc, 0x81, 0x8a, 0x83, 0xa8, 0x82, 0x00, 0x4e, 0x90, 0x8a, 0x01, 0xc8,
        ];
        // The second quote: an empty presence map, the series delta 1, the bid -100 from the
        // ask before it, the ask 200 over the bid.
        let second_quote = [0x80, 0x81, 0x7f, 0x9c, 0x01, 0xc8];
        // The trade: the template id and the size in the map, 0 deltas for series and price.
        let trade = [0xc4, 0x82, 0x80, 0x80, 0x85];
        let expected: Vec<u8> = [&first_quote[..], &second_quote, &trade].concat();
        assert_eq!(bytes[HEADER_BYTES..], expected);
    }

    /// `m` with only the fields its kind's template carries (the others 0).
    fn carried(m: Message) -> Message {
        let mut out = Message::zeroed(m.kind);
        for &(field, _) in template_of(m.kind).fields {
            field.set(&mut out, field.get(&m));
        }
        out
    }

    fn kind(trade: bool) -> MessageKind {
        if trade {
            MessageKind::Trade
        } else {
            MessageKind::Quote
        }
    }

    fn arbitrary_message() -> impl Strategy<Value = Message> {
        (
            any::<bool>(),
            any::<[u64; 4]>(),
            any::<[u32; 5]>(),
            any::<u8>(),
        )
            .prop_map(
                |(trade, [seq, p1, p2, p3], [u, series, s1, s2, s3], exchange)| {
                    carried(Message {
                        kind: kind(trade),
                        seq,
                        underlying: u,
                        series,
                        exchange,
                        bid_price: p1,
                        bid_size: s1,
                        ask_price: p2,
                        ask_size: s2,
                        trade_price: p3,
                        trade_size: s3,
                    })
                },
            )
    }

    /// Messages like a feed's: runs of equal or neighbouring values, so the operators'
    /// absent-field paths are taken often.
    fn feedlike_message() -> impl Strategy<Value = Message> {
        (any::<bool>(), 0..3u64, 0..3u32, 0..2u8, 0..3u64, 0..2u32).prop_map(
            |(trade, seq, small, exchange, price, size)| {
                carried(Message {
                    kind: kind(trade),
                    seq,
                    underlying: small,
                    series: small,
                    exchange,
                    bid_price: price * 100,
                    bid_size: size * 10,
                    ask_price: price * 100 + 100,
                    ask_size: size * 10,
                    trade_price: price,
                    trade_size: size,
                })
            },
        )
    }

    proptest! {
        #[test]
        fn any_messages_round_trip(
            messages in proptest::collection::vec(
                prop_oneof![arbitrary_message(), feedlike_message()],
                0..30,
            ),
            channel in any::<u16>(),
            packet_seq in any::<u64>(),
            first_seq in any::<u64>(),
            sent_ns in any::<u64>(),
        ) {
            let header = PacketHeader { channel, packet_seq, first_seq, count: 0, sent_ns };
            let mut bytes = Vec::new();
            encode_packet(&header, &messages, &mut bytes);
            let mut decoded = Vec::new();
            let got = decode_packet(&bytes, &mut decoded).unwrap();
            prop_assert_eq!(&decoded, &messages);
            prop_assert_eq!(got, PacketHeader {
                count: messages.len() as u16,
                first_seq: messages.first().map_or(first_seq, |m| m.seq),
                ..header
            });
            prop_assert!(bytes.len() <= HEADER_BYTES + messages.len() * MAX_MESSAGE_BYTES);
        }
    }

    #[test]
    fn the_sender_stamp_lands_in_the_header() {
        let mut bytes = packet(&[quote(1, 1, 1)]);
        assert!(stamp_sent_ns(&mut bytes, 123_456));
        let header = decode_packet(&bytes, &mut Vec::new()).unwrap();
        assert_eq!(header.sent_ns, 123_456);
        assert!(!stamp_sent_ns(&mut [0; 31], 1));
    }

    fn refusal(bytes: &[u8]) -> DecodeError {
        let mut out = vec![quote(1, 1, 1)];
        let error = decode_packet(bytes, &mut out).unwrap_err();
        assert!(out.is_empty());
        error
    }

    #[test]
    fn corrupt_packets_are_refused_with_what_and_where() {
        let good = packet(&[quote(5, 40, 10_000), quote(6, 41, 10_100)]);
        assert_eq!(
            refusal(&good[..10]).to_string(),
            "a packet of 10 bytes is shorter than the 32-byte header (byte 0)"
        );
        let mut bad = good.clone();
        bad[0] = b'X';
        assert_eq!(refusal(&bad).problem, DecodeProblem::BadMagic(*b"XF"));
        bad = good.clone();
        bad[2] = 9;
        assert_eq!(refusal(&bad).problem, DecodeProblem::UnsupportedVersion(9));
        bad = good.clone();
        bad[3] = 1;
        assert_eq!(refusal(&bad).problem, DecodeProblem::UnknownFlags(1));
        // Count 3 where there are 2.
        bad = good.clone();
        bad[7] = 3;
        let error = refusal(&bad);
        assert_eq!(
            error.problem,
            DecodeProblem::FewerMessages {
                declared: 3,
                decoded: 2
            }
        );
        assert_eq!(error.offset, good.len());
        // Count 1 where there are 2.
        bad[7] = 1;
        assert!(matches!(
            refusal(&bad).problem,
            DecodeProblem::TrailingBytes { declared: 1, .. }
        ));
        // Cut inside the last field.
        let error = refusal(&good[..good.len() - 1]);
        assert_eq!(error.problem, DecodeProblem::Truncated);
        assert_eq!(error.message, Some(1));
        // An unknown template id.
        bad = good.clone();
        bad[HEADER_BYTES + 1] = 0x83;
        assert_eq!(
            refusal(&bad).to_string(),
            "unknown template id 3 (byte 34, message 0)"
        );
        // The first message without its seq: the map's seq bit cleared.
        bad = good.clone();
        bad[HEADER_BYTES] &= !0x20;
        assert_eq!(refusal(&bad).problem, DecodeProblem::MissingValue("seq"));
        // The header's first seq disagrees.
        bad = good.clone();
        bad[23] = 9;
        assert_eq!(
            refusal(&bad).problem,
            DecodeProblem::FirstSeqMismatch {
                header: 9,
                message: 5
            }
        );
    }

    #[test]
    fn a_narrow_field_out_of_range_is_refused() {
        let mut bytes = packet(&[quote(1, 0, 1)]);
        // The series delta (byte 5 of the message: map, id, seq, underlying, then series).
        let series_at = HEADER_BYTES + 4;
        assert_eq!(bytes[series_at], 0x80);
        bytes[series_at] = 0xff; // -1
        assert_eq!(refusal(&bytes).problem, DecodeProblem::OutOfRange("series"));
    }
}
