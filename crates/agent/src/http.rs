//! The HTTP/1.1 wire format of the agent client, on well-kept parsers: the
//! agent URL on `http::Uri`, the answer's status line and headers on
//! `httparse` (RFC 9112), chunk sizes on `httparse::parse_chunk_size`.
//! The client keeps the sockets (a chosen source port, one deadline).

use http::uri::{Authority, Scheme, Uri};

use crate::server::DEFAULT_PORT;

/// A parsed `http://host[:port][/prefix]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// The host, IPv6 without brackets.
    pub host: String,
    pub port: u16,
    /// Prefix before `/v1` (no trailing slash), e.g. "" or "/agent".
    pub prefix: String,
}

/// The agent URL: `http://` (or no scheme), a host, an optional port
/// (default the agent's, [`DEFAULT_PORT`]), an optional path prefix; no
/// credentials, query or fragment. `Err` says what is wrong.
pub(crate) fn parse_url(url: &str) -> Result<Target, &'static str> {
    let with_scheme = if url.contains("://") {
        url.to_string()
    } else {
        format!("http://{url}")
    };
    let uri: Uri = with_scheme
        .parse()
        .map_err(|_| "not a URL of the form http://host[:port][/prefix]")?;
    if uri.scheme() != Some(&Scheme::HTTP) {
        return Err("only http:// is supported (use a token, and a tunnel for encryption)");
    }
    let authority: &Authority = uri.authority().ok_or("no host")?;
    if authority.as_str().contains('@') {
        return Err("credentials in the URL are not supported (give the token separately)");
    }
    if uri.query().is_some() || url.contains('#') {
        return Err("no query or fragment, please");
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    // Anything after the host is ":port"; http::Uri keeps a port that does
    // not fit 16 bits but has no number for it.
    let port_given = authority.as_str().len() > authority.host().len();
    let port = match authority.port_u16() {
        Some(p) => p,
        None if port_given => return Err("the port is not a number 1-65535"),
        None => DEFAULT_PORT,
    };
    if host.is_empty() || port == 0 {
        return Err("host and a non-zero port are needed");
    }
    Ok(Target {
        host: host.to_string(),
        port,
        prefix: uri.path().trim_end_matches('/').to_string(),
    })
}

/// A raw HTTP answer.
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Headers read at most.
const MAX_HEADERS: usize = 32;

/// Parses an HTTP/1.x answer. `Ok(None)`: incomplete so far (with `eof`,
/// only when nothing or a cut-short answer arrived). `Err`: not HTTP.
pub(crate) fn parse_answer(raw: &[u8], eof: bool) -> Result<Option<Answer>, String> {
    if raw.len() >= 5 && !raw.starts_with(b"HTTP/") {
        return Err(format!("the answer starts with {:?}", snippet(raw)));
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let head_len = match response.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if raw.len() > 64 * 1024 => {
            return Err("no end of headers in the first 64 KiB".into())
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("bad status line or headers ({e})")),
    };
    let status = response
        .code
        .filter(|s| (100..600).contains(s))
        .ok_or("bad status code")?;
    let header = |name: &str| {
        response
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_string())
    };
    let chunked =
        header("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let length = header("content-length")
        .map(|v| {
            v.parse::<usize>()
                .map_err(|_| format!("bad Content-Length {v:?}"))
        })
        .transpose()?;
    let body = &raw[head_len..];
    if chunked {
        return match dechunk(body)? {
            Some(body) => Ok(Some(Answer { status, body })),
            None if eof => Err("chunked body cut short".into()),
            None => Ok(None),
        };
    }
    match length {
        Some(n) if body.len() >= n => Ok(Some(Answer {
            status,
            body: body[..n].to_vec(),
        })),
        Some(_) if eof => Err("body shorter than its Content-Length".into()),
        Some(_) => Ok(None),
        None if eof => Ok(Some(Answer {
            status,
            body: body.to_vec(),
        })),
        None => Ok(None),
    }
}

/// Decodes a chunked body (RFC 9112 section 7.1); `Ok(None)` while
/// incomplete.
fn dechunk(mut data: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut out = Vec::new();
    loop {
        let (start, size) = match httparse::parse_chunk_size(data) {
            Ok(httparse::Status::Complete(c)) => c,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(_) => return Err("bad chunk size".into()),
        };
        let size = usize::try_from(size).map_err(|_| "chunk too large")?;
        data = &data[start..];
        if size == 0 {
            return Ok(Some(out));
        }
        if data.len() < size + 2 {
            return Ok(None);
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
}

/// The first bytes of a body, for an error message.
pub(crate) fn snippet(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(60)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = parse_url("http://10.0.0.2:9000").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.prefix.as_str()),
            ("10.0.0.2", 9000, "")
        );
        let t = parse_url("http://[fd77::2]:80/agent/").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.prefix.as_str()),
            ("fd77::2", 80, "/agent")
        );
        let t = parse_url("rcv.example").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("rcv.example", DEFAULT_PORT));
        for bad in [
            "https://x:1",
            "http://",
            "http://x:0",
            "http://x:99999",
            "http://u:p@x:1",
            "http://[::1",
            "http://x:1/?a=b",
            "http://x:1/#f",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn answers() {
        let a = parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}xx", false)
            .unwrap()
            .unwrap();
        assert_eq!((a.status, a.body.as_slice()), (200, b"{}".as_slice()));
        assert!(
            parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}", false)
                .unwrap()
                .is_none()
        );
        assert!(parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}", true).is_err());
        let a = parse_answer(
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x\r\nde\r\n0\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!((a.status, a.body.as_slice()), (404, b"abcde".as_slice()));
        let a = parse_answer(b"HTTP/1.0 200 OK\r\n\r\nhello", true)
            .unwrap()
            .unwrap();
        assert_eq!(a.body, b"hello");
        assert!(parse_answer(b"SSH-2.0-OpenSSH\r\n", false).is_err());
        assert!(parse_answer(b"HTTP/1.1 abc\r\n\r\n", true).is_err());
        assert!(parse_answer(b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", true).is_err());
        assert!(parse_answer(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", true).is_err());
    }

    proptest::proptest! {
        /// Whatever a server sends, the parser answers without panicking,
        /// and a body it returns is never longer than what arrived.
        #[test]
        fn any_bytes_parse_without_panic(
            raw in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512),
            prefix in proptest::sample::select(vec![
                &b""[..],
                b"HTTP/1.1 200 OK\r\n",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n",
            ]),
            eof in proptest::prelude::any::<bool>(),
        ) {
            let input = [prefix, &raw[..]].concat();
            if let Ok(Some(a)) = parse_answer(&input, eof) {
                proptest::prop_assert!(a.body.len() <= input.len());
            }
        }

        #[test]
        fn any_url_parses_without_panic(url in "\\PC{0,40}") {
            let _ = parse_url(&url);
        }
    }
}
