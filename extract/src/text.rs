//! Markdown and plain text: decoded as UTF-8 with invalid bytes replaced by U+FFFD.

use crate::{ExtractError, Limits};

/// Decodes bytes as text: a UTF-8 byte-order mark is dropped, UTF-16 with a byte-order mark is
/// decoded as UTF-16, anything else as UTF-8 with invalid sequences replaced by U+FFFD. Line
/// ends are normalised to `\n`.
pub(crate) fn decode_utf8(bytes: &[u8]) -> String {
    let text = if let Some(rest) = bytes.strip_prefix(b"\xEF\xBB\xBF") {
        String::from_utf8_lossy(rest).into_owned()
    } else if let Some(rest) = bytes.strip_prefix(b"\xFF\xFE") {
        utf16(rest, u16::from_le_bytes)
    } else if let Some(rest) = bytes.strip_prefix(b"\xFE\xFF") {
        utf16(rest, u16::from_be_bytes)
    } else {
        String::from_utf8_lossy(bytes).into_owned()
    };
    if text.contains('\r') {
        text.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        text
    }
}

fn utf16(bytes: &[u8], unit: fn([u8; 2]) -> u16) -> String {
    let units: Vec<u16> = bytes
        .chunks(2)
        .map(|c| match c {
            [a, b] => unit([*a, *b]),
            _ => 0xFFFD,
        })
        .collect();
    String::from_utf16_lossy(&units)
}

fn has_utf16_bom(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\xFF\xFE") || bytes.starts_with(b"\xFE\xFF")
}

pub(crate) fn extract_markdown(bytes: &[u8], limits: &Limits) -> Result<String, ExtractError> {
    let text = decode_utf8(bytes);
    crate::guard::check_output(&text, limits)?;
    Ok(text)
}

/// Plain text. A file with NUL bytes in its first 8 KiB (and no UTF-16 byte-order mark) is
/// binary, not text, and is refused as [`ExtractError::Unsupported`] rather than indexed as
/// replacement characters.
pub(crate) fn extract_text(bytes: &[u8], limits: &Limits) -> Result<String, ExtractError> {
    let head = &bytes[..bytes.len().min(8192)];
    if !has_utf16_bom(bytes) && head.contains(&0) {
        return Err(ExtractError::Unsupported(
            "binary data of an unknown format, not text".to_string(),
        ));
    }
    let text = decode_utf8(bytes);
    crate::guard::check_output(&text, limits)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_with_replacement_and_normalises_newlines() {
        assert_eq!(decode_utf8(b"a\xFFb\r\nc\rd"), "a\u{FFFD}b\nc\nd");
        assert_eq!(decode_utf8(b"\xEF\xBB\xBFhi"), "hi");
        assert_eq!(decode_utf8(b"\xFF\xFEh\x00i\x00"), "hi");
        assert_eq!(decode_utf8(b"\xFE\xFF\x00h\x00i"), "hi");
    }

    #[test]
    fn binary_is_not_text() {
        let r = extract_text(b"PK\x03\x04\x00\x00", &Limits::default());
        assert!(matches!(r, Err(ExtractError::Unsupported(_))));
    }
}
