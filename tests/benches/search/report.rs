//! Latency statistics, the report, and the timing loops.

use std::fmt::Write as _;
use std::future::Future;
use std::time::{Duration, Instant};

use super::WARMUP;

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stats {
    pub(crate) p50: f64,
    pub(crate) p95: f64,
    pub(crate) mean: f64,
    pub(crate) n: usize,
}

impl Stats {
    /// From latencies in milliseconds (nearest-rank percentiles).
    pub(crate) fn of(mut ms: Vec<f64>) -> Stats {
        if ms.is_empty() {
            return Stats::default();
        }
        ms.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            let i = ((p / 100.0) * ms.len() as f64).ceil() as usize;
            ms[i.clamp(1, ms.len()) - 1]
        };
        Stats {
            p50: pct(50.0),
            p95: pct(95.0),
            mean: ms.iter().sum::<f64>() / ms.len() as f64,
            n: ms.len(),
        }
    }

    pub(crate) fn row(&self, label: &str) -> String {
        format!(
            "  {label:<44} p50 {:>9.3} ms   p95 {:>9.3} ms   mean {:>9.3} ms   (n={})",
            self.p50, self.p95, self.mean, self.n
        )
    }
}

pub(crate) struct Report {
    pub(crate) text: String,
}

impl Report {
    pub(crate) fn line(&mut self, s: impl AsRef<str>) {
        let s = s.as_ref();
        eprintln!("[report] {s}");
        let _ = writeln!(self.text, "{s}");
    }
}

pub(crate) fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|e| format!("unreadable ({e})"))
}

/// The machine's CPU time counters (`/proc/stat`'s first line), to tell how much of a run
/// the hypervisor took for other guests (steal): on a shared host that, not the code, is
/// what moves a run's latencies by milliseconds.
#[derive(Clone, Copy)]
pub(crate) struct CpuTimes {
    steal: u64,
    total: u64,
}

impl CpuTimes {
    pub(crate) fn now() -> Option<CpuTimes> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        Some(CpuTimes {
            steal: *fields.get(7)?,
            total: fields.iter().sum(),
        })
    }

    /// The share of CPU time stolen since `self`, as text.
    pub(crate) fn steal_since(start: Option<CpuTimes>) -> String {
        match (start, CpuTimes::now()) {
            (Some(a), Some(b)) if b.total > a.total => format!(
                "{:.1}% of CPU time stolen by the host",
                100.0 * (b.steal - a.steal) as f64 / (b.total - a.total) as f64
            ),
            _ => "steal time unknown (no /proc/stat)".to_owned(),
        }
    }
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// `WARMUP` untimed calls, then one timed call per query index.
pub(crate) async fn time_async<F, Fut>(n: usize, mut f: F) -> Stats
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = ()>,
{
    for i in 0..WARMUP {
        f(i % n).await;
    }
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i).await;
        v.push(ms(t.elapsed()));
    }
    Stats::of(v)
}

pub(crate) fn time_sync(n: usize, mut f: impl FnMut(usize)) -> Stats {
    for i in 0..WARMUP {
        f(i % n);
    }
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        f(i);
        v.push(ms(t.elapsed()));
    }
    Stats::of(v)
}
