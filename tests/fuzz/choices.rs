//! A choice sequence: generators read their decisions from a byte vector that proptest
//! produces and shrinks. Running out of bytes reads zeros, and every generator makes choice
//! 0 its simplest option (a leaf, no mutation), so shrinking the bytes (dropping them,
//! lowering them) shrinks the generated input.

pub struct Choices<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Choices<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Choices { data, pos: 0 }
    }

    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        match n {
            0 | 1 => 0,
            2..=256 => self.byte() as usize % n,
            257..=65536 => (((self.byte() as usize) << 8) | self.byte() as usize) % n,
            _ => {
                let mut x = 0usize;
                for _ in 0..4 {
                    x = (x << 8) | self.byte() as usize;
                }
                x % n
            }
        }
    }

    /// True with probability about `num/den`; a zero byte reads false.
    pub fn chance(&mut self, num: u32, den: u32) -> bool {
        let b = self.byte() as u32;
        b != 0 && b * den >= 256 * (den - num)
    }

    pub fn pick<'p, T>(&mut self, items: &'p [T]) -> &'p T {
        &items[self.below(items.len())]
    }

    pub fn pick_str<'s>(&mut self, items: &[&'s str]) -> &'s str {
        items[self.below(items.len())]
    }

    /// An index chosen by weight (weights must not all be 0).
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u32 = weights.iter().sum();
        let mut x = self.below(total as usize) as u32;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }

    /// A 64-bit value from 8 bytes.
    pub fn u64(&mut self) -> u64 {
        let mut x = 0u64;
        for _ in 0..8 {
            x = (x << 8) | self.byte() as u64;
        }
        x
    }
}
