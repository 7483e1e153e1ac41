//! Embedding vectors: their stored forms and the arithmetic the store does on them. Pure; the
//! one place that knows how an embedding is encoded.
//!
//! - **Stored forms.** SQLite keeps an embedding as a blob of [`EMBEDDING_DIM`] little-endian
//!   f32s ([`f32_blob`] writes it, [`blob_f32`] and [`extend_from_blob`] read it); PostgreSQL
//!   as pgvector's `vector(384)`, written from its text form ([`vector_literal`]).
//! - **Arithmetic.** [`dot`] is the scan kernel of SQLite's in-memory index
//!   ([`VectorIndex`](crate::store::vindex::VectorIndex)): 16 independent lanes, so the compiler
//!   vectorizes it for whatever instruction set `pulp` dispatched to. [`normalize`] scales to
//!   unit length (the index stores normalized rows, so a dot product is a cosine there);
//!   [`cosine`] is for vectors that are not normalized (entity anchors read from SQLite).

/// Dimension of every stored embedding (the schema's `vector(384)` / 1536-byte blobs).
pub const EMBEDDING_DIM: usize = 384;

/// pgvector's text form: `[0.1,0.2,…]`.
pub(crate) fn vector_literal(v: &[f32]) -> String {
    let mut s = String::with_capacity(v.len() * 10 + 2);
    s.push('[');
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&x.to_string());
    }
    s.push(']');
    s
}

/// SQLite's embedding column: little-endian f32s.
pub fn f32_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The f32s of an embedding blob; `None` when its length is not a multiple of 4.
pub(crate) fn blob_f32(b: &[u8]) -> Option<Vec<f32>> {
    let mut v = Vec::with_capacity(b.len() / 4);
    extend_from_blob(&mut v, b).then_some(v)
}

/// Appends the f32s of an embedding blob to `out` (a row of a matrix being filled). Returns
/// false, appending nothing, when the blob's length is not a multiple of 4.
pub(crate) fn extend_from_blob(out: &mut Vec<f32>, b: &[u8]) -> bool {
    if !b.len().is_multiple_of(4) {
        return false;
    }
    out.extend(
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
    true
}

/// Dot product with 16 independent lanes, so the compiler vectorizes it (the float additions
/// are not reassociated otherwise) for whatever instruction set `pulp` dispatched to. Pairs
/// beyond the shorter slice are ignored.
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut acc = [0.0_f32; LANES];
    let ca = a.chunks_exact(LANES);
    let cb = b.chunks_exact(LANES);
    let (ta, tb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    let mut tail = 0.0;
    for (x, y) in ta.iter().zip(tb) {
        tail += x * y;
    }
    let mut s = [0.0_f32; 4];
    for i in 0..4 {
        s[i] = (acc[i] + acc[i + 4]) + (acc[i + 8] + acc[i + 12]);
    }
    ((s[0] + s[1]) + (s[2] + s[3])) + tail
}

/// Scales `v` to unit length (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if n > 0.0 {
        for x in v.iter_mut() {
            *x /= n;
        }
    }
}

/// The cosine of two vectors; 0 when their lengths differ or either is zero.
pub(crate) fn cosine(a: &[f32], b: &[f32]) -> f32 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (na, nb) = (dot(a, a), dot(b, b));
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot(a, b) / (na.sqrt() * nb.sqrt())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() < 1e-5
    }

    #[test]
    fn blob_round_trip() {
        let v: Vec<f32> = (0..EMBEDDING_DIM).map(|i| i as f32 * 0.25 - 7.5).collect();
        let b = f32_blob(&v);
        assert_eq!(b.len(), EMBEDDING_DIM * 4);
        assert_eq!(blob_f32(&b), Some(v.clone()));
        let mut out = vec![1.0];
        assert!(extend_from_blob(&mut out, &b));
        assert_eq!(out.len(), EMBEDDING_DIM + 1);
        assert_eq!(out[1..], v[..]);
        // A blob cut mid-float is refused, and nothing is appended.
        assert_eq!(blob_f32(&b[..5]), None);
        assert!(!extend_from_blob(&mut out, &b[..5]));
        assert_eq!(out.len(), EMBEDDING_DIM + 1);
        assert_eq!(blob_f32(&[]), Some(Vec::new()));
    }

    #[test]
    fn literal_is_pgvector_text() {
        assert_eq!(vector_literal(&[0.5, -1.0, 2.0]), "[0.5,-1,2]");
        assert_eq!(vector_literal(&[]), "[]");
    }

    #[test]
    fn dot_matches_the_plain_sum() {
        // 37 is not a multiple of the lane count: the tail counts.
        let a: Vec<f32> = (0..37).map(|i| (i as f32).sin()).collect();
        let b: Vec<f32> = (0..37).map(|i| (i as f32 * 0.7).cos()).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!(close(dot(&a, &b), plain));
        assert_eq!(dot(&[], &[]), 0.0);
    }

    #[test]
    fn normalize_gives_unit_length() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert!(close(v[0], 0.6) && close(v[1], 0.8));
        let mut long: Vec<f32> = (1..=EMBEDDING_DIM).map(|i| i as f32).collect();
        normalize(&mut long);
        assert!(close(dot(&long, &long), 1.0));
        let mut zero = vec![0.0; 4];
        normalize(&mut zero);
        assert_eq!(zero, vec![0.0; 4]);
    }

    #[test]
    fn cosine_of_vectors_and_blobs() {
        let v = [1.0f32, 0.0, 0.0];
        let back = blob_f32(&f32_blob(&v)).unwrap_or_default();
        assert!(close(cosine(&v, &back), 1.0));
        assert_eq!(cosine(&v, &[0.0, 1.0, 0.0]), 0.0);
        assert!(close(cosine(&[1.0, 1.0], &[2.0, 2.0]), 1.0));
        assert!(close(cosine(&[1.0, 0.0], &[-3.0, 0.0]), -1.0));
        assert!(close(
            cosine(&[1.0, 0.0], &[1.0, 1.0]),
            std::f32::consts::FRAC_1_SQRT_2
        ));
        // Different lengths and zero vectors score 0.
        assert_eq!(cosine(&v, &[1.0, 0.0]), 0.0);
        assert_eq!(cosine(&v, &[0.0; 3]), 0.0);
        // Scale does not matter; normalizing first gives the same cosine as a dot product.
        let a: Vec<f32> = (0..40).map(|i| (i as f32).sin()).collect();
        let b: Vec<f32> = (0..40).map(|i| (i as f32 * 1.3).cos()).collect();
        let (mut na, mut nb) = (a.clone(), b.clone());
        normalize(&mut na);
        normalize(&mut nb);
        assert!(close(cosine(&a, &b), dot(&na, &nb)));
        let scaled: Vec<f32> = a.iter().map(|x| x * 9.0).collect();
        assert!(close(cosine(&scaled, &b), cosine(&a, &b)));
    }
}
