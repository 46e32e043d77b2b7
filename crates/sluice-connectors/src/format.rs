//! Record formats: how a connector turns the bytes of one record (a Kafka message's value)
//! into a typed tuple and back. JSON (serde_json), CSV (one record, no header), UTF-8 text
//! and raw bytes. A record that does not decode is an error the connector handles per its
//! [`OnBadRecord`] setting; nothing here panics on any input.

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde::Serialize;
use thiserror::Error;

/// Why a record did not decode or encode.
#[derive(Debug, Error)]
pub enum FormatError {
    /// The bytes are not JSON of the expected shape.
    #[error("not valid JSON for this type: {0}")]
    Json(#[from] serde_json::Error),
    /// The bytes are not a CSV record of the expected shape.
    #[error("not a valid CSV record for this type: {0}")]
    Csv(#[from] csv::Error),
    /// The bytes are not UTF-8.
    #[error("not UTF-8: {0}")]
    Utf8(#[from] std::str::Utf8Error),
    /// The record has no value (a Kafka tombstone) where one is needed.
    #[error("the record has no value")]
    Missing,
}

/// Decodes one record's bytes into a `T` and encodes a `T` into bytes.
pub trait Format<T>: Send {
    /// The tuple the bytes hold.
    fn decode(&self, bytes: &[u8]) -> Result<T, FormatError>;
    /// Appends the bytes of `value` to `out`.
    fn encode(&self, value: &T, out: &mut Vec<u8>) -> Result<(), FormatError>;
}

/// What a source does with a record its format cannot decode. Every such record is counted
/// (`bad_records`) whatever the setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnBadRecord {
    /// Drops it and goes on.
    #[default]
    Drop,
    /// Emits it as a [`BadRecord`](crate::kafka::BadRecord) on output port 1 (the side
    /// output), which the source must then have.
    SideOutput,
    /// Fails the job, naming where the record is (topic, partition and offset).
    Fail,
}

/// JSON: one JSON value per record, read and written with `serde_json`.
pub struct Json<T>(PhantomData<fn() -> T>);

impl<T> Json<T> {
    /// The JSON format of `T`.
    pub fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T> Default for Json<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for Json<T> {
    fn clone(&self) -> Self {
        Self::new()
    }
}

impl<T: Serialize + DeserializeOwned> Format<T> for Json<T> {
    fn decode(&self, bytes: &[u8]) -> Result<T, FormatError> {
        Ok(serde_json::from_slice(bytes)?)
    }

    fn encode(&self, value: &T, out: &mut Vec<u8>) -> Result<(), FormatError> {
        Ok(serde_json::to_writer(out, value)?)
    }
}

/// CSV: one record per message, fields in the order of `T`'s (no header line).
pub struct Csv<T> {
    delimiter: u8,
    of: PhantomData<fn() -> T>,
}

impl<T> Csv<T> {
    /// CSV with `delimiter` between fields (`b','` for comma-separated values).
    pub fn new(delimiter: u8) -> Self {
        Self {
            delimiter,
            of: PhantomData,
        }
    }
}

impl<T> Clone for Csv<T> {
    fn clone(&self) -> Self {
        Self::new(self.delimiter)
    }
}

impl<T: Serialize + DeserializeOwned> Format<T> for Csv<T> {
    fn decode(&self, bytes: &[u8]) -> Result<T, FormatError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .delimiter(self.delimiter)
            .from_reader(bytes);
        match reader.deserialize().next() {
            Some(record) => Ok(record?),
            None => Err(FormatError::Missing),
        }
    }

    fn encode(&self, value: &T, out: &mut Vec<u8>) -> Result<(), FormatError> {
        let mut writer = csv::WriterBuilder::new()
            .has_headers(false)
            .delimiter(self.delimiter)
            .from_writer(out);
        writer.serialize(value)?;
        let out = writer
            .into_inner()
            .map_err(|e| FormatError::Csv(csv::Error::from(e.into_error())))?;
        // The record terminator belongs to a file of records, not to one message.
        if out.last() == Some(&b'\n') {
            out.pop();
        }
        Ok(())
    }
}

/// UTF-8 text: the whole record is one line (a trailing line end is not part of it).
#[derive(Debug, Clone, Copy, Default)]
pub struct Lines;

impl Format<String> for Lines {
    fn decode(&self, bytes: &[u8]) -> Result<String, FormatError> {
        let text = std::str::from_utf8(bytes)?;
        let text = text.strip_suffix('\n').unwrap_or(text);
        Ok(text.strip_suffix('\r').unwrap_or(text).to_owned())
    }

    fn encode(&self, value: &String, out: &mut Vec<u8>) -> Result<(), FormatError> {
        out.extend_from_slice(value.as_bytes());
        Ok(())
    }
}

/// Raw bytes: the record as it is; a `Vec<u8>` in a source's records, a
/// [`BytesTuple`](sluice_types::BytesTuple) (or a `Vec<u8>`) in a sink's input.
#[derive(Debug, Clone, Copy, Default)]
pub struct Raw;

impl Format<sluice_types::BytesTuple> for Raw {
    fn decode(&self, bytes: &[u8]) -> Result<sluice_types::BytesTuple, FormatError> {
        Ok(sluice_types::BytesTuple(bytes.to_vec()))
    }

    fn encode(
        &self,
        value: &sluice_types::BytesTuple,
        out: &mut Vec<u8>,
    ) -> Result<(), FormatError> {
        out.extend_from_slice(&value.0);
        Ok(())
    }
}

impl Format<Vec<u8>> for Raw {
    fn decode(&self, bytes: &[u8]) -> Result<Vec<u8>, FormatError> {
        Ok(bytes.to_vec())
    }

    fn encode(&self, value: &Vec<u8>, out: &mut Vec<u8>) -> Result<(), FormatError> {
        out.extend_from_slice(value);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Trade {
        symbol: String,
        price: f64,
    }

    fn round_trip<T: PartialEq + std::fmt::Debug>(format: &dyn Format<T>, value: T) {
        let mut bytes = Vec::new();
        format.encode(&value, &mut bytes).unwrap();
        assert_eq!(format.decode(&bytes).unwrap(), value);
    }

    #[test]
    fn every_format_reads_back_what_it_wrote() {
        let trade = || Trade {
            symbol: "ACME, Inc".into(),
            price: 1.5,
        };
        round_trip(&Json::new(), trade());
        round_trip(&Csv::new(b','), trade());
        round_trip(&Lines, "a line".to_owned());
        round_trip(&Raw, vec![0, 255, 10]);
    }

    #[test]
    fn bad_records_are_errors_not_panics() {
        assert!(matches!(
            Json::<Trade>::new().decode(b"{\"symbol\": 1"),
            Err(FormatError::Json(_))
        ));
        assert!(matches!(
            Csv::<Trade>::new(b',').decode(b"ACME,not-a-price"),
            Err(FormatError::Csv(_))
        ));
        assert!(matches!(
            Csv::<Trade>::new(b',').decode(b""),
            Err(FormatError::Missing)
        ));
        assert!(matches!(
            Lines.decode(&[0xff, 0xfe]),
            Err(FormatError::Utf8(_))
        ));
    }

    #[test]
    fn a_line_loses_its_line_end() {
        assert_eq!(Lines.decode(b"words here\r\n").unwrap(), "words here");
    }
}
