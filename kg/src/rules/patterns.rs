//! Relation patterns: anchored regular expressions over the normalized text BETWEEN two names
//! in one sentence ("Acme Robotics| acquired |Globex"). Anchoring the whole gap keeps
//! precision high: a pattern fires only when nothing else stands between the two names.

use std::sync::LazyLock;

use regex::Regex;

/// A type a pattern implies for one end (used only when the name itself gave no type).
pub type Hint = Option<&'static str>;

/// Extra condition on the final types of the two ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    None,
    /// The predicate applies to a person subject; otherwise `alt` is used.
    PersonElse(&'static str),
    /// Subject organization or event, object place.
    OrgInPlace,
    /// Both places ("Berlin, Germany").
    BothPlaces,
}

#[derive(Debug)]
pub struct Rule {
    pub re: Regex,
    pub predicate: &'static str,
    /// The first name is the object ("Globex was acquired by Acme": Acme acquired Globex).
    pub reverse: bool,
    /// Hints for the first and second name in text order.
    pub hint_first: Hint,
    pub hint_second: Hint,
    pub cond: Cond,
}

const PRE: &str = r"^(?:, ?)?(?:(?:who|which|that) )?";
/// `PRE`, also allowing a short appositive noun phrase ("Acme, a startup based in …").
const PRE_APP: &str = r"^(?:, ?(?:(?:a|an|the) [^,;]{1,60} )?)?(?:(?:who|which|that) )?";
const ADV: &str = r"(?:(?:has|have|had|also|recently|officially|formally|finally|previously|quietly|now|just|reportedly|successfully|will|would|then|later|subsequently|already|eventually|first) )*";
const END: &str = r"(?: (?:the|its|a|an|their|his|her|our))?$";
const ORG: &str = "organization";
const PERSON: &str = "person";
const PLACE: &str = "place";
const PRODUCT: &str = "product";

struct Spec {
    pre: &'static str,
    adv: bool,
    body: String,
    end: &'static str,
    predicate: &'static str,
    reverse: bool,
    hint_first: Hint,
    hint_second: Hint,
    cond: Cond,
}

fn spec(
    pre: &'static str,
    adv: bool,
    body: impl Into<String>,
    predicate: &'static str,
    reverse: bool,
    hints: (Hint, Hint),
) -> Spec {
    Spec {
        pre,
        adv,
        body: body.into(),
        end: END,
        predicate,
        reverse,
        hint_first: hints.0,
        hint_second: hints.1,
        cond: Cond::None,
    }
}

const LEAD_ROLES: &str = r"(?:ceo|chief executive(?: officer)?|president|chair(?:man|woman|person)?|head|managing director|executive director|director general|general manager|leader|boss)";
const STAFF_ROLES: &str = r"(?:engineer|scientist|researcher|analyst|developer|designer|manager|employee|consultant|professor|lecturer|student|lawyer|economist|editor|reporter|journalist|specialist|architect|officer|director|cto|cfo|coo|cio|cmo|vp|vice president|intern|advisor|adviser|staff|partner|worker|teacher|fellow|programmer|member of staff|chief [a-z]+ officer)";

fn specs() -> Vec<Spec> {
    let o = Some(ORG);
    let p = Some(PERSON);
    let pl = Some(PLACE);
    let pr = Some(PRODUCT);
    vec![
        // acquired
        spec(
            PRE,
            true,
            r"(?:acquired|acquires|acquire|bought|buys|buy|purchased|purchases|took over|takes over|agreed to (?:acquire|buy|purchase)|completed (?:its|the) (?:acquisition|purchase|takeover) of|announced (?:its|the) (?:acquisition|purchase|takeover) of|is acquiring|is buying)",
            "acquired",
            false,
            (o, o),
        ),
        spec(
            PRE_APP,
            false,
            r"(?:is |was |were |has been |had been |will be |is being |is to be )?(?:acquired|bought|purchased|taken over) by",
            "acquired",
            true,
            (o, o),
        ),
        // founded_by (the company is the subject)
        spec(
            PRE_APP,
            false,
            r"(?:is |was |were |had been |has been )?(?:co-?)?founded (?:in \d{4} )?by",
            "founded_by",
            false,
            (o, None),
        ),
        spec(
            PRE,
            true,
            r"(?:co-?)?(?:founded|established)",
            "founded_by",
            true,
            (None, o),
        ),
        spec(
            PRE,
            false,
            r"(?:is |was |became )?(?:the |a )?(?:co-?)?founder (?:and (?:ceo|chief executive(?: officer)?|chair(?:man|woman)?) )?of",
            "founded_by",
            true,
            (p, o),
        ),
        spec(
            r"^(?:'s?|’s?)? ?",
            false,
            r"(?:co-?)?founder",
            "founded_by",
            false,
            (o, p),
        ),
        // leads
        Spec {
            end: r"(?: (?:the|its))?$",
            ..spec(
                PRE,
                false,
                format!(
                    r"(?:is |was |has been |serves as |became |as |will become )?(?:the )?(?:(?:current|new|interim|acting) )?(?:co-?)?{LEAD_ROLES} (?:of|at)"
                ),
                "leads",
                false,
                (p, o),
            )
        },
        spec(
            PRE,
            true,
            r"(?:leads|led|heads|headed|runs|ran|chairs|chaired|is leading|is heading)",
            "leads",
            false,
            (p, o),
        ),
        Spec {
            end: "$",
            ..spec(
                r"^(?:'s?|’s?)? ?",
                false,
                format!(r"(?:(?:new|current|interim|acting) )?{LEAD_ROLES}"),
                "leads",
                true,
                (o, p),
            )
        },
        // works_at
        spec(
            PRE,
            false,
            format!(
                r"(?:is |was |has been |serves as |as |became )?(?:a |an |the )?(?:[a-z-]+ ){{0,3}}{STAFF_ROLES}(?: of [a-z ]{{1,30}})? (?:at|for|with)"
            ),
            "works_at",
            false,
            (p, o),
        ),
        spec(
            PRE,
            false,
            r"(?:is |was |has been |as |became )?(?:the )?(?:cto|cfo|coo|cio|cmo|vp [a-z ]{1,30}|vice president [a-z ]{1,30}|chief [a-z]+ officer) of",
            "works_at",
            false,
            (p, o),
        ),
        spec(
            PRE,
            true,
            r"(?:works|worked|is working|was working|is employed|was employed|was hired|is hired) (?:at|for|by)",
            "works_at",
            false,
            (p, o),
        ),
        Spec {
            cond: Cond::PersonElse("member_of"),
            ..spec(
                PRE,
                true,
                r"(?:joined|joins|rejoined|will join)",
                "works_at",
                false,
                (None, o),
            )
        },
        // located_in
        spec(
            PRE_APP,
            false,
            r"(?:is |are |was |were |has been |remains )?(?:(?:now|still|currently) )?(?:based|headquartered|located|situated|registered|incorporated) (?:in|at|out of|near)",
            "located_in",
            false,
            (None, pl),
        ),
        spec(
            r"^(?:'s?|’s?) ",
            false,
            r"(?:headquarters|head office|main office|home base|hq)(?: (?:is|are|were|was))? (?:in|at)",
            "located_in",
            false,
            (None, pl),
        ),
        spec(
            PRE,
            true,
            r"(?:has|have|keeps|maintains|opened|moved|relocated) (?:its |their )?(?:headquarters|head office|hq|main office) (?:in|to)",
            "located_in",
            false,
            (None, pl),
        ),
        Spec {
            end: "$",
            cond: Cond::BothPlaces,
            ..spec("^", false, ",", "located_in", false, (None, None))
        },
        Spec {
            end: "$",
            cond: Cond::OrgInPlace,
            ..spec("^", false, "in", "located_in", false, (None, None))
        },
        // part_of
        spec(
            PRE_APP,
            false,
            r"(?:is |was |are |became |has become |remains |is now |now )?(?:a |an |the )?(?:(?:wholly[- ]owned|majority[- ]owned|fully[- ]owned|new|main|local|regional|european|american|german|british|french|international|research|software|consumer) )?(?:subsidiary|division|unit|part|branch|arm|affiliate|department|business unit|brand|member company|spin-?off|sister company) of",
            "part_of",
            false,
            (None, o),
        ),
        // member_of
        spec(
            PRE_APP,
            false,
            r"(?:is |was |are |were |became |has been )?(?:a |an |the )?(?:(?:founding|board|full|permanent|longtime|long-time|new|active) )?members? of",
            "member_of",
            false,
            (None, o),
        ),
        // partner_of
        spec(
            PRE,
            true,
            r"(?:partnered|partners|partner|teamed up|teams up|is partnering|are partnering|signed (?:a|an) (?:[a-z-]+ )?(?:partnership|deal|agreement|contract)|formed (?:a|an) (?:[a-z-]+ )?(?:partnership|alliance)|entered (?:into )?(?:a|an) (?:[a-z-]+ )?(?:partnership|alliance)|announced (?:a|an) (?:[a-z-]+ )?(?:partnership|collaboration)|is collaborating|collaborates|collaborated|cooperates|joined forces) with",
            "partner_of",
            false,
            (None, None),
        ),
        spec(
            PRE_APP,
            false,
            r"(?:is |was |became )?(?:a |an |the )?(?:(?:longtime|long-time|strategic|key|technology|major|official) )?partner of",
            "partner_of",
            false,
            (None, None),
        ),
        // customer_of
        spec(
            PRE_APP,
            false,
            r"(?:is |was |are |has been |became |remains )?(?:a |an |the )?(?:(?:longtime|long-time|major|key|large|big|new|early|first|loyal|paying) )*(?:customers?|clients?) of",
            "customer_of",
            false,
            (None, o),
        ),
        spec(
            PRE,
            true,
            r"(?:buys|bought|purchases|purchased|licenses|licensed|sources|sourced|orders|ordered)(?: [a-z-]+){0,4} from",
            "customer_of",
            false,
            (None, o),
        ),
        spec(
            PRE,
            true,
            r"(?:supplies|supplied|sells to|sold to|provides [a-z -]{1,30} to|delivers [a-z -]{1,30} to)",
            "customer_of",
            true,
            (o, None),
        ),
        // owns
        spec(
            PRE,
            true,
            r"(?:owns|owned|controls|controlled|holds (?:a )?(?:majority|controlling) stake in)",
            "owns",
            false,
            (None, None),
        ),
        spec(
            PRE_APP,
            false,
            r"(?:is |was |are |were )?(?:(?:wholly|majority|partly|jointly|fully|privately) )?owned by",
            "owns",
            true,
            (None, None),
        ),
        // produces
        Spec {
            end: r"(?: (?:the|its|a|an|their|new|latest|first))*$",
            ..spec(
                PRE,
                true,
                r"(?:produces|produced|makes|made|manufactures|manufactured|builds|built|develops|developed|launched|launches|released|releases|unveiled|unveils|introduced|introduces|ships|shipped|designs|designed|publishes|published)",
                "produces",
                false,
                (o, pr),
            )
        },
        spec(
            PRE_APP,
            false,
            r"(?:is |was |are |were )?(?:produced|made|manufactured|built|developed|launched|released|designed|created|published) by",
            "produces",
            true,
            (pr, o),
        ),
        // depends_on
        spec(
            PRE,
            true,
            r"(?:depends|depended|relies|relied|is built|are built|was built|runs|ran|is based|are based) on",
            "depends_on",
            false,
            (None, None),
        ),
        spec(
            PRE,
            true,
            r"(?:uses|used|requires|required|integrates with|is powered by|are powered by)",
            "depends_on",
            false,
            (None, None),
        ),
    ]
}

/// The compiled rules, in priority order (the first match wins). A pattern that fails to
/// compile is dropped; a unit test asserts none does.
pub static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    specs()
        .into_iter()
        .filter_map(|s| {
            let adv = if s.adv { ADV } else { "" };
            let re = Regex::new(&format!("{}{}{}{}", s.pre, adv, s.body, s.end)).ok()?;
            Some(Rule {
                re,
                predicate: s.predicate,
                reverse: s.reverse,
                hint_first: s.hint_first,
                hint_second: s.hint_second,
                cond: s.cond,
            })
        })
        .collect()
});

/// The number of specs (for the compile test).
pub fn spec_count() -> usize {
    specs().len()
}

/// "a partnership between X and Y": the text before X ends with one of these and the gap is
/// "and" / "&".
pub static PAIR_CONTEXT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?:partnership|alliance|joint venture|collaboration|agreement|deal|cooperation) (?:between|of)$").ok()
});

/// Lowercase, `’` → `'`, whitespace runs → one space, trimmed.
pub fn norm_gap(gap: &str) -> String {
    gap.to_lowercase()
        .replace('’', "'")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// Where a leading appositive ", a Berlin startup," ends in a normalized gap (the byte index
/// just after its closing comma).
pub fn appositive_end(gap: &str) -> Option<usize> {
    let rest = gap.strip_prefix(',')?;
    let close = rest.find(',')?;
    (close > 1 && close <= 80).then_some(close + 2)
}

/// The first rule matching the whole normalized gap, or else the gap after a leading
/// appositive ("Acme, a Berlin startup, acquired …").
pub fn match_gap(gap: &str) -> Option<&'static Rule> {
    let find = |g: &str| RULES.iter().find(|r| r.re.is_match(g));
    find(gap).or_else(|| {
        let end = appositive_end(gap)?;
        find(gap[end..].trim_start())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(RULES.len(), spec_count());
        assert!(PAIR_CONTEXT.is_some());
    }

    #[test]
    fn gaps_match_their_predicates() {
        let cases = [
            (" acquired ", "acquired", false),
            (" has agreed to acquire ", "acquired", false),
            (", a Berlin startup, was acquired by", "acquired", true),
            (" was acquired by ", "acquired", true),
            (" is based in ", "located_in", false),
            (", a robotics startup based in ", "located_in", false),
            (" is headquartered in ", "located_in", false),
            ("'s headquarters are in ", "located_in", false),
            (" works at ", "works_at", false),
            (", a senior engineer at ", "works_at", false),
            (", CTO of ", "works_at", false),
            (" joined ", "works_at", false),
            (", CEO of ", "leads", false),
            (" is the chief executive officer of ", "leads", false),
            (" CEO ", "leads", true),
            ("’s chief executive ", "leads", true),
            (" founded ", "founded_by", true),
            (", which was founded in 2015 by ", "founded_by", false),
            (", a subsidiary of ", "part_of", false),
            (" is part of ", "part_of", false),
            (" partnered with ", "partner_of", false),
            (
                " has signed a strategic partnership with ",
                "partner_of",
                false,
            ),
            (" is a longtime customer of ", "customer_of", false),
            (" supplies ", "customer_of", true),
            (" owns ", "owns", false),
            (" is owned by ", "owns", true),
            (" launched ", "produces", false),
            (" is a member of ", "member_of", false),
            (" relies on ", "depends_on", false),
            (", ", "located_in", false),
        ];
        for (gap, pred, rev) in cases {
            let r = match_gap(&norm_gap(gap)).unwrap_or_else(|| panic!("no rule for {gap:?}"));
            assert_eq!((r.predicate, r.reverse), (pred, rev), "{gap:?}");
        }
    }

    #[test]
    fn unrelated_gaps_do_not_match() {
        for gap in [
            " and ",
            " said that ",
            " met with ",
            ", while ",
            " announced record revenue; ",
            " acquired a stake in a company that competes with ",
            " is larger than ",
        ] {
            assert!(match_gap(&norm_gap(gap)).is_none(), "{gap:?}");
        }
    }
}
