//! Server-sent events: the `data` of each event of a streamed response body, as the
//! HTML standard's event-stream format defines them.
//!
//! Lines end with `\n`, `\r\n` or `\r`; `data:` lines add to the event's data (one
//! space after the colon dropped, several lines joined with `\n`); a blank line ends
//! the event; comments (`:`) and the other fields (`event`, `id`, `retry`) are not
//! needed by the codecs (every provider repeats the event's type in its data). An
//! event the body ends in the middle of is dropped, as the standard says: the
//! provider's `Assembler` then reports the stream as unfinished.

/// The data of each complete event in `body`, in order; events without data are
/// skipped.
pub(crate) fn event_data(body: &[u8]) -> Vec<Vec<u8>> {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let mut events = Vec::new();
    let mut data: Option<Vec<u8>> = None;
    for line in lines(body) {
        if line.is_empty() {
            events.extend(data.take());
            continue;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => continue,
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if field == b"data" {
            let buffer = data.get_or_insert_with(Vec::new);
            if !buffer.is_empty() {
                buffer.push(b'\n');
            }
            buffer.extend_from_slice(value);
        }
    }
    events
}

/// The lines of `body`, each followed by its line end; a last line with no end is
/// left out (its event is unfinished).
fn lines(body: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = body;
    std::iter::from_fn(move || {
        let end = rest.iter().position(|&b| b == b'\n' || b == b'\r')?;
        let line = &rest[..end];
        let skip = if rest[end] == b'\r' && rest.get(end + 1) == Some(&b'\n') {
            2
        } else {
            1
        };
        rest = &rest[end + skip..];
        Some(line)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(body: &str) -> Vec<String> {
        event_data(body.as_bytes())
            .into_iter()
            .map(|d| String::from_utf8(d).unwrap())
            .collect()
    }

    #[test]
    fn splits_events_and_joins_data_lines() {
        let body = "event: message_start\ndata: {\"a\":1}\n\n: keep-alive\n\ndata:{\"b\":\r\ndata: 2}\r\n\r\nid: 7\nretry: 10\n\ndata: [DONE]\r\r";
        assert_eq!(data(body), ["{\"a\":1}", "{\"b\":\n2}", "[DONE]"]);
    }

    #[test]
    fn an_event_cut_off_by_the_end_of_the_body_is_dropped() {
        assert_eq!(data("data: one\n\ndata: tw"), ["one"]);
        assert_eq!(data("data: one\n\ndata: two\n"), ["one"]);
        assert_eq!(data("\u{feff}data: x\n\n"), ["x"]);
        assert!(data("").is_empty());
    }
}
