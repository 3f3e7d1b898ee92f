//! A tiny deterministic pseudo-random generator (xorshift64*), so every workload is the
//! same on every machine and every run without a dependency.

/// xorshift64* (Vigna 2014). Not for anything but picking benchmark shapes.
#[derive(Debug, Clone)]
pub struct XorShift {
    state: u64,
}

impl XorShift {
    /// A generator from `seed` (a zero seed is replaced: xorshift would stay at zero).
    pub fn new(seed: u64) -> XorShift {
        XorShift { state: if seed == 0 { 0x9E37_79B9_7F4A_7C15 } else { seed } }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (0 when `n` is 0). The modulo bias is irrelevant at these sizes.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// A value in `lo..=hi` (`lo` when `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.below(hi - lo + 1)
        }
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = XorShift::new(42);
        let mut b = XorShift::new(42);
        let xs: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(XorShift::new(43).next_u64(), xs[0]);
    }

    #[test]
    fn zero_seed_still_moves_and_ranges_hold() {
        let mut r = XorShift::new(0);
        assert_ne!(r.next_u64(), 0);
        for _ in 0..1000 {
            let v = r.range(8, 12);
            assert!((8..=12).contains(&v));
        }
        assert_eq!(r.below(0), 0);
        assert_eq!(r.range(5, 5), 5);
        assert_eq!(r.range(5, 1), 5);
    }
}
