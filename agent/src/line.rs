//! Framing of the agent protocol (AGENT.md §1): one request or reply per
//! line, each line bounded, shared by every agent's server and the client.

use std::io::{self, BufRead};

/// One line read from a connection.
#[derive(Debug, PartialEq, Eq)]
pub enum LineRead {
    /// A complete line, newline (and a preceding `\r`) removed.
    Line(Vec<u8>),
    /// A line longer than the bound, discarded; its length in bytes.
    TooLong(usize),
    /// End of stream.
    Eof,
}

/// Reads one line of at most `max` bytes; a longer one is consumed up to
/// its newline without being kept. A last line without newline counts.
pub fn read_line_bounded<R: BufRead>(r: &mut R, max: usize) -> io::Result<LineRead> {
    let mut line = Vec::new();
    let mut total = 0usize;
    let mut too_long = false;
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            return Ok(if total == 0 && line.is_empty() && !too_long {
                LineRead::Eof
            } else if too_long {
                LineRead::TooLong(total)
            } else {
                LineRead::Line(line)
            });
        }
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        total = total.saturating_add(chunk.len());
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = newline.map_or(buf.len(), |i| i + 1);
        r.consume(used);
        if newline.is_some() {
            if too_long {
                return Ok(LineRead::TooLong(total));
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(LineRead::Line(line));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    fn lines(input: &[u8], max: usize) -> Vec<LineRead> {
        let mut r = BufReader::with_capacity(7, input);
        let mut out = Vec::new();
        loop {
            let l = read_line_bounded(&mut r, max).unwrap();
            if l == LineRead::Eof {
                return out;
            }
            out.push(l);
        }
    }

    #[test]
    fn bounded_lines() {
        use LineRead::*;
        assert_eq!(
            lines(b"ab\r\n0123456789abcdef\nxyz\n\nlast", 10),
            vec![
                Line(b"ab".to_vec()),
                TooLong(16),
                Line(b"xyz".to_vec()),
                Line(vec![]),
                Line(b"last".to_vec()),
            ]
        );
        assert_eq!(lines(b"", 10), vec![]);
        assert_eq!(lines(b"0123456789", 10), vec![Line(b"0123456789".to_vec())]);
        assert_eq!(lines(b"0123456789a", 10), vec![TooLong(11)]);
    }
}
