//! Memory pressure as the kernel measures it (PSI, `/proc/pressure/memory`):
//! the figures the policy weighs against `[pressure]`, read once per cycle.
//! Only reading; the PSI trigger that wakes the daemon when pressure rises
//! is `daemon::pressure`'s.

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// Where the kernel shows memory pressure (Linux ≥ 4.20 with `CONFIG_PSI`;
/// absent on older kernels, with `psi=0`, and in some containers).
pub const DEFAULT_PATH: &str = "/proc/pressure/memory";

/// One reading: the share of recent wall time in which tasks stalled on
/// memory (reclaim, swap-in, thrashing), in percent.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pressure {
    /// `some`: at least one task stalled; over the last 10, 60, 300 s.
    pub some_avg10: f64,
    pub some_avg60: f64,
    pub some_avg300: f64,
    /// `full`: every non-idle task stalled at once (last 10 s); `None`
    /// where the file has no `full` line.
    pub full_avg10: Option<f64>,
}

/// Parses the file's text:
/// `some avg10=0.00 avg60=0.23 avg300=0.13 total=566344` and a `full` line
/// like it. A `some` line with all three averages is required; unknown
/// fields are ignored (the kernel may add some).
pub fn parse(text: &str) -> Result<Pressure, String> {
    let (mut some, mut full) = (None, None);
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let slot = match words.next() {
            Some("some") => &mut some,
            Some("full") => &mut full,
            _ => continue,
        };
        let mut avgs = [None; 3];
        for word in words {
            let Some((key, value)) = word.split_once('=') else {
                return Err(format!("malformed field {word:?}"));
            };
            let i = match key {
                "avg10" => 0,
                "avg60" => 1,
                "avg300" => 2,
                _ => continue,
            };
            let v: f64 = value.parse().map_err(|_| format!("{key}={value:?} is not a number"))?;
            if !(0.0..=100.0).contains(&v) {
                return Err(format!("{key}={value} is not a percentage"));
            }
            avgs[i] = Some(v);
        }
        *slot = Some(avgs);
    }
    let some = some.ok_or("no \"some\" line")?;
    let [Some(some_avg10), Some(some_avg60), Some(some_avg300)] = some else {
        return Err("the \"some\" line lacks avg10, avg60 or avg300".into());
    };
    Ok(Pressure { some_avg10, some_avg60, some_avg300, full_avg10: full.and_then(|f| f[0]) })
}

/// Reads and parses the file at `path` (a text that is no pressure file is
/// `InvalidData`).
pub fn read(path: &Path) -> io::Result<Pressure> {
    // The file is a few dozen bytes; a larger one is not a pressure file.
    let mut text = String::new();
    io::Read::read_to_string(&mut io::Read::take(std::fs::File::open(path)?, 4096), &mut text)?;
    parse(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("not a PSI file: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_kernel_writes() {
        let p = parse(
            "some avg10=23.45 avg60=0.23 avg300=0.13 total=566344\nfull avg10=1.50 avg60=0.14 avg300=0.07 total=374291\n",
        )
        .unwrap();
        assert_eq!(
            p,
            Pressure { some_avg10: 23.45, some_avg60: 0.23, some_avg300: 0.13, full_avg10: Some(1.5) },
            "{p:?}"
        );
    }

    #[test]
    fn full_line_is_optional_and_unknown_fields_are_ignored() {
        let p = parse("some avg10=0.00 avg60=100.00 avg300=5 total=1 newfield=x\n").unwrap();
        assert_eq!((p.some_avg10, p.some_avg60, p.some_avg300, p.full_avg10), (0.0, 100.0, 5.0, None));
    }

    #[test]
    fn refuses_what_is_no_pressure_file() {
        for bad in [
            "",
            "full avg10=1.00 avg60=0.00 avg300=0.00 total=0\n",
            "some avg10=1.00 avg60=0.00 total=0\n",
            "some avg10=abc avg60=0.00 avg300=0.00 total=0\n",
            "some avg10=150.00 avg60=0.00 avg300=0.00 total=0\n",
            "some avg10=NaN avg60=0.00 avg300=0.00 total=0\n",
            "some avg10 avg60=0.00 avg300=0.00\n",
            "MemTotal: 16318412 kB\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn read_says_what_is_wrong() {
        let dir = std::env::temp_dir().join(format!("mcp-reaper-psi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("memory");
        std::fs::write(&f, "some avg10=50.00 avg60=10.00 avg300=2.00 total=99\n").unwrap();
        assert_eq!(read(&f).unwrap().some_avg10, 50.0);
        std::fs::write(&f, "hello\n").unwrap();
        assert_eq!(read(&f).unwrap_err().kind(), io::ErrorKind::InvalidData);
        assert_eq!(read(&dir.join("absent")).unwrap_err().kind(), io::ErrorKind::NotFound);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
