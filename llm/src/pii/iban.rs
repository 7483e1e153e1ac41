//! IBAN validation: the registry's length per country and the ISO 7064 MOD 97-10 check.

/// IBAN length per country code (ISO 13616 registry). Only these countries are recognised:
/// a two-letter prefix outside the registry is never an IBAN, which keeps false positives
/// (1 in 97 random strings pass the check digits) out of ordinary text.
const LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AL", 28),
    ("AT", 20),
    ("AZ", 28),
    ("BA", 20),
    ("BE", 16),
    ("BG", 22),
    ("BH", 22),
    ("BI", 27),
    ("BR", 29),
    ("BY", 28),
    ("CH", 21),
    ("CR", 22),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DJ", 27),
    ("DK", 18),
    ("DO", 28),
    ("EE", 20),
    ("EG", 29),
    ("ES", 24),
    ("FI", 18),
    ("FK", 18),
    ("FO", 18),
    ("FR", 27),
    ("GB", 22),
    ("GE", 22),
    ("GI", 23),
    ("GL", 18),
    ("GR", 27),
    ("GT", 28),
    ("HN", 28),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IL", 23),
    ("IQ", 23),
    ("IS", 26),
    ("IT", 27),
    ("JO", 30),
    ("KW", 30),
    ("KZ", 20),
    ("LB", 28),
    ("LC", 32),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("LY", 25),
    ("MC", 27),
    ("MD", 24),
    ("ME", 22),
    ("MK", 19),
    ("MN", 20),
    ("MR", 27),
    ("MT", 31),
    ("MU", 30),
    ("NI", 28),
    ("NL", 18),
    ("NO", 15),
    ("OM", 23),
    ("PK", 24),
    ("PL", 28),
    ("PS", 29),
    ("PT", 25),
    ("QA", 29),
    ("RO", 24),
    ("RS", 22),
    ("RU", 33),
    ("SA", 24),
    ("SC", 31),
    ("SD", 18),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("SO", 23),
    ("ST", 25),
    ("SV", 28),
    ("TL", 23),
    ("TN", 24),
    ("TR", 26),
    ("UA", 29),
    ("VA", 22),
    ("VG", 24),
    ("XK", 20),
    ("YE", 30),
];

/// The registered IBAN length for a country code (upper case), if the country uses IBANs.
pub(crate) fn country_length(country: &str) -> Option<usize> {
    LENGTHS
        .iter()
        .find(|(code, _)| *code == country)
        .map(|&(_, len)| len)
}

/// ISO 7064 MOD 97-10 over a compact, upper-case IBAN: move the first four characters to the
/// end, read letters as 10..=35, and the number mod 97 must be 1.
pub(crate) fn mod97_ok(compact: &str) -> bool {
    if compact.len() < 5 || !compact.is_ascii() {
        return false;
    }
    let (head, tail) = compact.split_at(4);
    let mut rem: u32 = 0;
    for c in tail.chars().chain(head.chars()) {
        let value = match c {
            '0'..='9' => u32::from(c) - u32::from('0'),
            'A'..='Z' => u32::from(c) - u32::from('A') + 10,
            _ => return false,
        };
        rem = if value < 10 {
            (rem * 10 + value) % 97
        } else {
            (rem * 100 + value) % 97
        };
    }
    rem == 1
}

/// Whether `compact` (no spaces, upper case) is a valid IBAN: registered country, its exact
/// length, two check digits, alphanumerics, and the MOD 97-10 check.
pub(crate) fn is_valid(compact: &str) -> bool {
    let bytes = compact.as_bytes();
    if bytes.len() < 5
        || !bytes[..2].iter().all(u8::is_ascii_uppercase)
        || !bytes[2..4].iter().all(u8::is_ascii_digit)
        || !bytes
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
    {
        return false;
    }
    match compact.get(..2).and_then(country_length) {
        Some(len) if len == bytes.len() => mod97_ok(compact),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_valid_ibans() {
        for iban in [
            "DE89370400440532013000",
            "GB29NWBK60161331926819",
            "FR1420041010050500013M02606",
            "BE68539007547034",
            "NL91ABNA0417164300",
            "NO9386011117947",
            "CH9300762011623852957",
            "IT60X0542811101000000123456",
            "ES9121000418450200051332",
            "MT84MALT011000012345MTLCAST001S",
        ] {
            assert!(is_valid(iban), "{iban}");
        }
    }

    #[test]
    fn wrong_check_digits_length_or_country_fail() {
        assert!(!is_valid("DE89370400440532013001")); // last digit changed
        assert!(!is_valid("DE88370400440532013000")); // check digits changed
        assert!(!is_valid("DE8937040044053201300")); // one short
        assert!(!is_valid("XX89370400440532013000")); // not a registry country
        assert!(!is_valid("de89370400440532013000")); // callers upper-case first
        assert!(!is_valid("DE89 3704 0044 0532 0130 00")); // callers remove spaces first
        assert!(!is_valid(""));
    }
}
