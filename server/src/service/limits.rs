//! Per-user rate limits: a token bucket per user for the requests that search, embed or call
//! an LLM (`search`, `searchAll`, `answer`), so that one principal cannot monopolize the
//! embedder or the LLM. Each request takes one token; the bucket refills at
//! [`RateLimit::per_second`] up to [`RateLimit::burst`]. Per process: instances sharing a
//! database each keep their own buckets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// A token bucket's shape. `per_second == 0` means unlimited.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit {
            per_second: 10.0,
            burst: 40,
        }
    }
}

impl RateLimit {
    pub fn unlimited() -> RateLimit {
        RateLimit {
            per_second: 0.0,
            burst: 1,
        }
    }
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets, one per user id.
#[derive(Clone, Debug)]
pub struct RateLimiter {
    limit: RateLimit,
    buckets: Arc<Mutex<HashMap<i64, Bucket>>>,
}

impl RateLimiter {
    pub fn new(limit: RateLimit) -> RateLimiter {
        RateLimiter {
            limit,
            buckets: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Takes one token of `user`'s bucket. `Err(seconds)`: empty; a token is back after
    /// about that long.
    pub fn take(&self, user: i64) -> Result<(), f64> {
        self.take_at(user, Instant::now())
    }

    fn take_at(&self, user: i64, now: Instant) -> Result<(), f64> {
        let RateLimit { per_second, burst } = self.limit;
        if per_second <= 0.0 {
            return Ok(());
        }
        let cap = f64::from(burst.max(1));
        let mut buckets = match self.buckets.lock() {
            Ok(b) => b,
            Err(poisoned) => poisoned.into_inner(),
        };
        // Idle buckets are full again: forget them so the map stays bounded by active users.
        if buckets.len() > 10_000 {
            buckets.retain(|_, b| {
                (b.tokens + now.duration_since(b.at).as_secs_f64() * per_second) < cap
            });
        }
        let b = buckets.entry(user).or_insert(Bucket {
            tokens: cap,
            at: now,
        });
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * per_second).min(cap);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err((1.0 - b.tokens) / per_second)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_bucket_empties_refills_and_is_per_user() {
        let l = RateLimiter::new(RateLimit {
            per_second: 2.0,
            burst: 3,
        });
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(l.take_at(1, t0).is_ok());
        }
        let wait = l.take_at(1, t0).err().unwrap_or_default();
        assert!((wait - 0.5).abs() < 1e-9, "{wait}");
        // Another user has a bucket of their own.
        assert!(l.take_at(2, t0).is_ok());
        // Half a second later one token is back, and only one.
        let t1 = t0 + Duration::from_millis(500);
        assert!(l.take_at(1, t1).is_ok());
        assert!(l.take_at(1, t1).is_err());
        // Never more than the burst, however long it was idle.
        let t2 = t1 + Duration::from_secs(3600);
        for _ in 0..3 {
            assert!(l.take_at(1, t2).is_ok());
        }
        assert!(l.take_at(1, t2).is_err());
    }

    #[test]
    fn zero_rate_is_unlimited() {
        let l = RateLimiter::new(RateLimit::unlimited());
        let t0 = Instant::now();
        assert!((0..10_000).all(|_| l.take_at(1, t0).is_ok()));
    }
}
