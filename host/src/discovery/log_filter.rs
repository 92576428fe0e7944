//! Log filters (the value of `NAAICE_LOG` and of the binaries' `--log`), checked so that a
//! typo is an error instead of a filter that selects nothing ([`log_filter`]), and the
//! nearest known word to a misspelled one ([`nearest`], also for variable names).

/// The targets a log filter may name: the crates of naaice-rs that log (a filter's target is
/// one of these, optionally followed by `::module`).
pub const LOG_TARGETS: &[&str] = &[
    "naaice",
    "naaice_core",
    "naaice_ap2",
    "naaice_swnaa",
    "naaice_bench",
    "naaice_info",
];

/// The levels a log filter may name (`tracing`'s; case does not matter, `0` to `5` too).
pub const LOG_LEVELS: &[&str] = &["error", "warn", "info", "debug", "trace", "off"];

/// The forms a log filter takes, for error messages and documentation.
pub const LOG_FILTER_FORMS: &str = "a level (error, warn, info, debug, trace, off) or \
    comma-separated directives TARGET=LEVEL and LEVEL, whose targets are naaice crates \
    (naaice, naaice_core, naaice_ap2, naaice_swnaa, naaice_bench, naaice_info, each optionally \
    followed by ::module), e.g. naaice=debug,warn";

/// A log filter ([`log_filter`]) that is not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a log filter: {reason}; expected {LOG_FILTER_FORMS}")]
pub struct LogFilterError {
    /// The filter as given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Checks a log filter (the value of `NAAICE_LOG` or `--log`) and returns it normalised
/// (each directive trimmed, empty ones dropped, levels in lower case), ready for
/// `tracing_subscriber::EnvFilter`. Accepted: the subset of `EnvFilter`'s syntax that selects
/// naaice's messages: directives `LEVEL`, `TARGET`, `TARGET=LEVEL`, where a target is one of
/// [`LOG_TARGETS`] (optionally followed by `::module`) and may carry a span filter
/// (`TARGET[span]=LEVEL`). `EnvFilter` itself takes any word as a target, so `degub` or
/// `verbose` would select nothing and silence every message; here they are errors, with the
/// nearest level or target suggested.
pub fn log_filter(text: &str) -> Result<String, LogFilterError> {
    let bad = |reason: String| LogFilterError {
        text: text.to_owned(),
        reason,
    };
    let mut directives = Vec::new();
    for raw in text.split(',') {
        let directive = raw.trim();
        if directive.is_empty() {
            continue;
        }
        directives.push(log_directive(directive).map_err(bad)?);
    }
    if directives.is_empty() {
        return Err(bad("it is empty".into()));
    }
    Ok(directives.join(","))
}

/// One directive of [`log_filter`], normalised, or why it is not accepted.
fn log_directive(directive: &str) -> Result<String, String> {
    // The level follows the last '=' outside a span filter's brackets.
    let span_end = directive.rfind(']').map_or(0, |i| i + 1);
    let (selector, level) = match directive[span_end..].find('=') {
        Some(i) => (
            directive[..span_end + i].trim(),
            Some(directive[span_end + i + 1..].trim()),
        ),
        None => (directive, None),
    };
    let (target, span) = match selector.find('[') {
        Some(i) if selector.ends_with(']') => (selector[..i].trim(), &selector[i..]),
        Some(_) => return Err(format!("{directive:?} has an unclosed '['")),
        None if selector.contains(']') => return Err(format!("{directive:?} has a stray ']'")),
        None => (selector, ""),
    };
    let level = match level {
        Some(l) => Some(log_level(l).ok_or_else(|| {
            format!(
                "{l:?} in {directive:?} is not a level{}",
                suggestion(l, LOG_LEVELS)
            )
        })?),
        // A lone word: a level, else a target (all its levels).
        None if span.is_empty() => {
            if let Some(l) = log_level(target) {
                return Ok(l);
            }
            None
        }
        None => None,
    };
    if !target.is_empty() {
        let crate_name = target.split("::").next().unwrap_or(target);
        let known = LOG_TARGETS.contains(&crate_name)
            && target
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        if !known {
            let what = if level.is_none() && span.is_empty() {
                "neither a level nor a naaice target"
            } else {
                "not a naaice target"
            };
            let all: Vec<&str> = LOG_LEVELS.iter().chain(LOG_TARGETS).copied().collect();
            let near = if level.is_none() && span.is_empty() {
                suggestion(target, &all)
            } else {
                suggestion(crate_name, LOG_TARGETS)
            };
            return Err(format!("{target:?} is {what}{near}"));
        }
    } else if span.is_empty() {
        return Err(format!("{directive:?} names no target"));
    }
    Ok(match level {
        Some(level) => format!("{target}{span}={level}"),
        None => format!("{target}{span}"),
    })
}

/// A level of a log filter in lower case, if `text` is one (`tracing`'s names, any case, or
/// the numbers 0 (off) to 5 (trace)).
fn log_level(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    if LOG_LEVELS.contains(&lower.as_str()) {
        return Some(lower);
    }
    match text {
        "0" => Some("off".into()),
        "1" => Some("error".into()),
        "2" => Some("warn".into()),
        "3" => Some("info".into()),
        "4" => Some("debug".into()),
        "5" => Some("trace".into()),
        _ => None,
    }
}

/// `" (did you mean X?)"` for the candidate nearest to `word`, if one is near enough.
fn suggestion(word: &str, candidates: &[&str]) -> String {
    nearest(word, candidates)
        .map(|n| format!(" (did you mean {n}?)"))
        .unwrap_or_default()
}

/// The candidate nearest to `word` (edit distance with transpositions, ignoring case), if it
/// is at most a third of the word's length away (2 edits for short words, at most 3).
pub fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let word = word.to_ascii_lowercase();
    let limit = (word.chars().count() / 3).clamp(2, 3);
    candidates
        .iter()
        .map(|c| {
            (
                strsim::damerau_levenshtein(&word, &c.to_ascii_lowercase()),
                *c,
            )
        })
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_filters_of_levels_and_naaice_targets() {
        for (text, normalised) in [
            ("warn", "warn"),
            (" DEBUG ", "debug"),
            ("4", "debug"),
            ("naaice=debug,warn", "naaice=debug,warn"),
            (" naaice = Trace , , info", "naaice=trace,info"),
            (
                "naaice::transport::soft=trace",
                "naaice::transport::soft=trace",
            ),
            ("naaice_swnaa", "naaice_swnaa"),
            ("naaice[rpc{id=3}]=debug", "naaice[rpc{id=3}]=debug"),
            ("[rpc]=debug", "[rpc]=debug"),
            ("off", "off"),
        ] {
            assert_eq!(log_filter(text).as_deref(), Ok(normalised), "{text}");
        }
    }

    /// Words `tracing` would take as targets that select nothing are errors naming the
    /// accepted forms, with the nearest level or target.
    #[test]
    fn log_filter_typos_are_errors() {
        for (text, needles) in [
            (
                "degub",
                &[
                    "\"degub\" is neither a level nor a naaice target",
                    "did you mean debug?",
                ][..],
            ),
            (
                "verbose",
                &["\"verbose\" is neither a level nor a naaice target"],
            ),
            (
                "naaice=verbose",
                &["\"verbose\" in \"naaice=verbose\" is not a level"],
            ),
            ("naaice=", &["\"\" in \"naaice=\" is not a level"]),
            (
                "naiace=debug",
                &["\"naiace\" is not a naaice target", "did you mean naaice?"],
            ),
            ("tokio=debug,warn", &["\"tokio\" is not a naaice target"]),
            (
                "naaice-swnaa=info",
                &["\"naaice-swnaa\" is not a naaice target"],
            ),
            ("", &["it is empty"]),
            (" , ", &["it is empty"]),
            ("naaice[rpc=debug", &["unclosed '['"]),
            ("=debug", &["names no target"]),
        ] {
            let err = log_filter(text).unwrap_err();
            let message = err.to_string();
            for needle in needles {
                assert!(message.contains(needle), "{text}: {message}");
            }
            assert!(message.contains(LOG_FILTER_FORMS), "{message}");
            assert_eq!(err.text, text);
        }
        assert_eq!(nearest("warning", LOG_LEVELS), None);
        assert_eq!(nearest("WARN", LOG_LEVELS), Some("warn"));
        assert_eq!(nearest("inf", LOG_LEVELS), Some("info"));
    }
}
