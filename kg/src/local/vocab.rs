//! The tokenizer and chat template, rebuilt from a GGUF file's metadata.
//!
//! Only GPT-2 style byte-level BPE vocabularies (`tokenizer.ggml.model = "gpt2"`: SmolLM2,
//! Qwen2, Llama 3) are supported: a `tokenizers` BPE model from `tokenizer.ggml.tokens` and
//! `tokenizer.ggml.merges`, the ByteLevel pre-tokenizer (preceded by single-digit splitting
//! when `tokenizer.ggml.pre` is `smollm`), and the control tokens (`token_type` 3) added as
//! special tokens so the chat template's markers encode as one token each. SentencePiece
//! vocabularies (`llama`) are refused at load time.

use std::collections::HashMap;

use candle_core::quantized::gguf_file::{Content, Value};
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{AddedToken, PreTokenizerWrapper, Tokenizer};

use super::LocalError;

/// How the chat is laid out for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatTemplate {
    /// `<|im_start|>role\n…<|im_end|>\n` (SmolLM2, Qwen2).
    ChatMl,
    /// `[INST] <<SYS>>\n…\n<</SYS>>\n\n… [/INST]` (Llama 2 style), after the BOS token.
    Llama2,
}

impl ChatTemplate {
    /// The prompt text for one system and one user message, ending where the assistant's
    /// reply starts.
    pub fn render(self, system: &str, user: &str) -> String {
        match self {
            ChatTemplate::ChatMl => format!(
                "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"
            ),
            ChatTemplate::Llama2 => {
                format!("[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST]")
            }
        }
    }

    /// The start of [`Self::render`]'s output that depends on the system message only.
    pub fn system_turn(self, system: &str) -> String {
        match self {
            ChatTemplate::ChatMl => format!("<|im_start|>system\n{system}<|im_end|>\n"),
            ChatTemplate::Llama2 => format!("[INST] <<SYS>>\n{system}\n<</SYS>>\n\n"),
        }
    }
}

/// The vocabulary side of a GGUF model.
pub struct Vocabulary {
    pub tokenizer: Tokenizer,
    /// Each token's bytes as the model would emit them; `None` for control tokens.
    pub token_bytes: Vec<Option<Vec<u8>>>,
    pub template: ChatTemplate,
    pub bos: Option<u32>,
    /// Special token strings ("<|im_start|>"…), neutralized in document text.
    pub specials: Vec<String>,
}

fn md<'a>(ct: &'a Content, key: &str) -> Result<&'a Value, LocalError> {
    ct.metadata
        .get(key)
        .ok_or_else(|| LocalError::Unsupported(format!("GGUF metadata {key} is missing")))
}

fn strings(v: &Value, key: &str) -> Result<Vec<String>, LocalError> {
    let bad = |e: candle_core::Error| LocalError::Gguf(format!("{key}: {e}"));
    v.to_vec()
        .map_err(bad)?
        .iter()
        .map(|s| s.to_string().cloned().map_err(bad))
        .collect()
}

/// GPT-2's reversible byte ↔ printable-character map: the character each byte is written as
/// in a byte-level BPE vocabulary.
pub fn byte_to_char() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = (b'!'..=b'~').contains(&b) || (0xa1..=0xac).contains(&b) || b >= 0xae;
        table[b as usize] = if printable {
            char::from(b)
        } else {
            let c = char::from_u32(256 + n).unwrap_or('\0');
            n += 1;
            c
        };
    }
    table
}

/// Decode a byte-level BPE token string into the bytes it stands for.
pub fn token_to_bytes(token: &str, inverse: &HashMap<char, u8>) -> Option<Vec<u8>> {
    token.chars().map(|c| inverse.get(&c).copied()).collect()
}

impl Vocabulary {
    pub fn from_gguf(ct: &Content) -> Result<Self, LocalError> {
        let model = md(ct, "tokenizer.ggml.model")?
            .to_string()
            .map_err(|e| LocalError::Gguf(e.to_string()))?;
        if model != "gpt2" {
            return Err(LocalError::Unsupported(format!(
                "tokenizer model {model:?} (only GPT-2 style byte-level BPE is supported)"
            )));
        }
        let tokens = strings(md(ct, "tokenizer.ggml.tokens")?, "tokens")?;
        let merges = strings(md(ct, "tokenizer.ggml.merges")?, "merges")?;
        let types: Vec<i32> = match ct.metadata.get("tokenizer.ggml.token_type") {
            Some(v) => v
                .to_vec()
                .map_err(|e| LocalError::Gguf(e.to_string()))?
                .iter()
                .map(|t| t.to_i32().unwrap_or(1))
                .collect(),
            None => vec![1; tokens.len()],
        };
        let pre = ct
            .metadata
            .get("tokenizer.ggml.pre")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        let template_src = ct
            .metadata
            .get("tokenizer.chat_template")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        let template = if template_src.contains("im_start") {
            ChatTemplate::ChatMl
        } else {
            ChatTemplate::Llama2
        };
        let bos = ct
            .metadata
            .get("tokenizer.ggml.bos_token_id")
            .and_then(|v| v.to_u32().ok());

        let vocab: Vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i as u32))
            .collect();
        let merges: Vec<(String, String)> = merges
            .iter()
            .filter_map(|m| m.split_once(' '))
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .build()
            .map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        let mut tokenizer = Tokenizer::new(bpe);
        let byte_level = ByteLevel::new(false, true, true);
        let pre_tok: PreTokenizerWrapper = if pre == "smollm" {
            Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into()
        } else {
            byte_level.into()
        };
        tokenizer.with_pre_tokenizer(Some(pre_tok));

        // Control and user-defined tokens are matched whole; everything else is byte-level.
        let inverse: HashMap<char, u8> = byte_to_char()
            .iter()
            .enumerate()
            .map(|(b, c)| (*c, b as u8))
            .collect();
        let mut specials = Vec::new();
        let mut token_bytes = Vec::with_capacity(tokens.len());
        for (i, t) in tokens.iter().enumerate() {
            let ty = types.get(i).copied().unwrap_or(1);
            if ty == 3 || ty == 4 {
                specials.push(t.clone());
                token_bytes.push(None);
            } else {
                token_bytes.push(token_to_bytes(t, &inverse).filter(|b| !b.is_empty()));
            }
        }
        let added: Vec<AddedToken> = specials
            .iter()
            .map(|s| AddedToken::from(s.clone(), true))
            .collect();
        tokenizer
            .add_special_tokens(added)
            .map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        Ok(Vocabulary {
            tokenizer,
            token_bytes,
            template,
            bos,
            specials,
        })
    }

    /// Token ids of `prompt` (special tokens in it are recognized).
    pub fn encode(&self, prompt: &str) -> Result<Vec<u32>, LocalError> {
        let enc = self
            .tokenizer
            .encode(prompt, false)
            .map_err(|e| LocalError::Tokenizer(e.to_string()))?;
        let mut ids = Vec::with_capacity(enc.len() + 1);
        if self.template == ChatTemplate::Llama2 {
            ids.extend(self.bos);
        }
        ids.extend_from_slice(enc.get_ids());
        Ok(ids)
    }

    /// Document text with special-token strings broken up, so a document cannot end the
    /// user turn or open another one.
    pub fn neutralize(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.specials {
            if s.len() > 1 && out.contains(s.as_str()) {
                let mut broken = String::with_capacity(s.len() + 3);
                let mut chars = s.chars();
                if let Some(c) = chars.next() {
                    broken.push(c);
                    broken.push('\u{200b}');
                }
                broken.extend(chars);
                out = out.replace(s.as_str(), &broken);
            }
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn byte_map_is_a_bijection() {
        let t = byte_to_char();
        let mut seen: Vec<char> = t.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 256);
        assert_eq!(t[b' ' as usize], 'Ġ');
        assert_eq!(t[b'\n' as usize], 'Ċ');
        assert_eq!(t[b'a' as usize], 'a');
        let inv: HashMap<char, u8> = t.iter().enumerate().map(|(b, c)| (*c, b as u8)).collect();
        assert_eq!(token_to_bytes("Ġthe", &inv).unwrap(), b" the");
        assert_eq!(token_to_bytes("Ã¼", &inv).unwrap(), "ü".as_bytes());
    }

    #[test]
    fn chatml_layout() {
        let p = ChatTemplate::ChatMl.render("S", "U");
        assert_eq!(
            p,
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
        );
        assert!(ChatTemplate::Llama2.render("S", "U").ends_with("U [/INST]"));
        for t in [ChatTemplate::ChatMl, ChatTemplate::Llama2] {
            assert!(t.render("S", "U").starts_with(&t.system_turn("S")));
        }
    }
}
