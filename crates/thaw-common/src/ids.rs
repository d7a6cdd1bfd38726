//! Block ids are derived from the file id and the block's index, so any part can
//! map a block to its file without a lookup (Alluxio's container-id scheme).

/// Bits of a block id that hold the block's index in its file.
pub const BLOCK_INDEX_BITS: u32 = 24;
/// Most blocks one file can have (1 PiB at 64 MiB blocks).
pub const MAX_BLOCKS_PER_FILE: u64 = 1 << BLOCK_INDEX_BITS;

pub fn block_id(file_id: u64, index: u64) -> u64 {
    debug_assert!(index < MAX_BLOCKS_PER_FILE);
    (file_id << BLOCK_INDEX_BITS) | index
}

pub fn file_of_block(block_id: u64) -> u64 {
    block_id >> BLOCK_INDEX_BITS
}

pub fn index_of_block(block_id: u64) -> u64 {
    block_id & (MAX_BLOCKS_PER_FILE - 1)
}

/// Number of blocks of a file (an empty file has none).
pub fn block_count(length: u64, block_size: u64) -> u64 {
    length.div_ceil(block_size.max(1))
}

/// Length of block `index` of a file of `length` bytes.
pub fn block_length(length: u64, block_size: u64, index: u64) -> u64 {
    let start = index * block_size;
    length.saturating_sub(start).min(block_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_lengths_add_up() {
        let id = block_id(123_456, 77);
        assert_eq!(file_of_block(id), 123_456);
        assert_eq!(index_of_block(id), 77);
        for (len, bs) in [(0u64, 8u64), (1, 8), (7, 8), (8, 8), (9, 8), (100, 8)] {
            let n = block_count(len, bs);
            let total: u64 = (0..n).map(|i| block_length(len, bs, i)).sum();
            assert_eq!(total, len);
            assert!((0..n).all(|i| block_length(len, bs, i) > 0));
        }
    }
}
