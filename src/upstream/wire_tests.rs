//! Tests of the node connection's buffers: grown for a large value, let go once empty.

use super::*;

#[test]
fn a_buffer_grown_for_a_large_reply_is_replaced_and_its_memory_asked_back() {
    let freed = crate::memory::freed_here();
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut grown = false;
    // A 1 MB reply arriving read by read.
    let reply = vec![b'x'; 1 << 20];
    let mut sent = 0;
    while sent < reply.len() {
        room_after_read(&mut input, &mut grown);
        let n = (input.capacity() - input.len()).min(reply.len() - sent);
        input.extend_from_slice(&reply[sent..sent + n]);
        sent += n;
    }
    assert!(grown && input.capacity() >= 1 << 20);
    assert_eq!(
        crate::memory::freed_here(),
        freed,
        "still holding the reply"
    );
    let frame = input.split_to(input.len()).freeze();
    room_after_read(&mut input, &mut grown);
    assert_eq!(input.capacity(), READ_CHUNK, "a fresh buffer once empty");
    assert!(!grown);
    assert_eq!(
        crate::memory::freed_here(),
        freed + 1,
        "the large buffer is reported"
    );
    drop(frame);
    // Small traffic afterwards: nothing more to report.
    input.extend_from_slice(b"+OK\r\n");
    input.clear();
    room_after_read(&mut input, &mut grown);
    assert_eq!(crate::memory::freed_here(), freed + 1);
}

#[test]
fn a_buffer_that_stayed_small_is_kept() {
    let freed = crate::memory::freed_here();
    let mut out = BytesMut::with_capacity(READ_CHUNK);
    let mut grown = false;
    out.extend_from_slice(&[b'y'; 100]);
    out.clear();
    let before = out.as_ptr();
    assert!(!fresh_once_empty(&mut out, &mut grown));
    assert_eq!(out.as_ptr(), before, "kept: no allocation per batch");
    grown = true;
    assert!(fresh_once_empty(&mut out, &mut grown));
    assert_eq!(crate::memory::freed_here(), freed + 1);
}
