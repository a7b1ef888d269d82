//! Tests of the Space-Saving sketch against exact counts.

use std::collections::HashMap;

use super::*;

/// A Zipf-like stream: key `i` (from 1) appears about `n / i^1.1` times, shuffled by a fixed
/// xorshift so heavy keys are spread through the stream.
fn skewed_stream(keys: u64, n: usize) -> Vec<u64> {
    let weights: Vec<f64> = (1..=keys).map(|i| 1.0 / (i as f64).powf(1.1)).collect();
    let total: f64 = weights.iter().sum();
    let mut stream = Vec::with_capacity(n);
    for (i, w) in weights.iter().enumerate() {
        let times = ((w / total) * n as f64).round() as usize;
        stream.extend(std::iter::repeat_n(i as u64 + 1, times));
    }
    let mut x = 0x2545_f491u32;
    for i in (1..stream.len()).rev() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        stream.swap(i, x as usize % (i + 1));
    }
    stream
}

fn hash_of(key: u64) -> u64 {
    key.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[test]
fn finds_the_heavy_keys_of_a_skewed_stream_with_bounded_error() {
    let stream = skewed_stream(10_000, 200_000);
    let mut truth: HashMap<u64, u64> = HashMap::new();
    let mut sketch = SpaceSaving::new(128);
    for &key in &stream {
        *truth.entry(key).or_default() += 1;
        sketch.offer(hash_of(key), 1, |c| c.text.set(&key.to_be_bytes(), ""));
    }
    let total = stream.len() as u64;
    let mut found: Vec<&Counter> = sketch.counters().iter().collect();
    found.sort_by_key(|c| std::cmp::Reverse(c.count));
    // The ten heaviest keys are the first ten, in order.
    let top: Vec<u64> = found[..10]
        .iter()
        .map(|c| {
            let key = u64::from_be_bytes(c.text.key().try_into().expect("8 bytes"));
            assert_eq!(hash_of(key), c.hash);
            key
        })
        .collect();
    assert_eq!(top, (1..=10).collect::<Vec<u64>>());
    for c in sketch.counters() {
        let key = u64::from_be_bytes(c.text.key().try_into().expect("8 bytes"));
        let exact = truth[&key];
        // Never under, over by at most its error, and that error at most total / counters.
        assert!(c.count >= exact, "key {key}: {} < {exact}", c.count);
        assert!(c.count - exact <= c.error, "key {key}");
        assert!(c.error <= total / 128, "key {key}: error {}", c.error);
    }
    // The head is measured within 1 % (its error is small next to its count).
    for c in &found[..5] {
        let key = u64::from_be_bytes(c.text.key().try_into().expect("8 bytes"));
        let exact = truth[&key] as f64;
        assert!((c.count as f64 - exact) / exact < 0.01, "key {key}");
    }
}

#[test]
fn memory_stays_bounded_however_many_keys_pass() {
    let mut sketch = SpaceSaving::new(16);
    let before = (sketch.counters.capacity(), sketch.index.len());
    for key in 0..100_000u64 {
        sketch.offer(hash_of(key), 1, |_| {});
    }
    assert_eq!(sketch.counters().len(), 16);
    assert_eq!((sketch.counters.capacity(), sketch.index.len()), before);
    assert_eq!(sketch.heap.capacity(), 16);
    // The weights add up: Space-Saving conserves the stream's total.
    let sum: u64 = sketch.counters().iter().map(|c| c.count).sum();
    assert_eq!(sum, 100_000);
}

#[test]
fn every_counter_is_found_again_after_many_takeovers() {
    let mut sketch = SpaceSaving::new(8);
    let mut x = 1u32;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        // Few low bits in common: long probe runs, many backward shifts.
        sketch.offer(u64::from(x % 64) << 4, 1 + u64::from(x % 3), |_| {});
        for (i, c) in sketch.counters().iter().enumerate() {
            let at = sketch.find(c.hash).expect("indexed");
            assert_eq!(sketch.index[at] as usize, i);
        }
        let occupied = sketch.index.iter().filter(|&&i| i != EMPTY).count();
        assert_eq!(occupied, sketch.counters().len());
        let min = sketch.counters().iter().map(|c| c.count).min();
        assert_eq!(
            Some(sketch.count_at(0)),
            min,
            "the heap's root is the minimum"
        );
    }
}

#[test]
fn clear_forgets_everything() {
    let mut sketch = SpaceSaving::new(4);
    for key in 0..10 {
        sketch.offer(hash_of(key), 3, |_| {});
    }
    sketch.clear();
    assert!(sketch.counters().is_empty());
    sketch.offer(hash_of(1), 2, |_| {});
    assert_eq!(sketch.counters()[0].count, 2);
    assert_eq!(sketch.counters()[0].error, 0);
}
