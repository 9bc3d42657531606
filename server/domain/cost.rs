//! What tokens cost: prices per model (USD per million tokens of each kind), matched by the
//! longest name prefix, and the cost of a set of per-model sums. A model no price matches has no
//! cost: it is named as unpriced, never guessed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::usage::Usage;

/// USD per million tokens of each kind.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Writing the prompt cache (Anthropic's 5-minute cache).
    pub cache_write: f64,
    pub cache_read: f64,
}

impl Price {
    const fn per_million(input: f64, output: f64, cache_write: f64, cache_read: f64) -> Price {
        Price { input, output, cache_write, cache_read }
    }

    /// What `usage` costs at this price, in USD.
    pub fn of(&self, usage: &Usage) -> f64 {
        let tokens = |n: i64, per_million: f64| n as f64 * per_million / 1_000_000.0;
        tokens(usage.input_tokens, self.input)
            + tokens(usage.output_tokens, self.output)
            + tokens(usage.cache_creation_input_tokens, self.cache_write)
            + tokens(usage.cache_read_input_tokens, self.cache_read)
    }

    /// A price must be a finite amount, zero or more.
    pub fn is_valid(&self) -> bool {
        [self.input, self.output, self.cache_write, self.cache_read].iter().all(|p| p.is_finite() && *p >= 0.0)
    }
}

/// Anthropic's list prices (USD per million tokens: input, output, 5-minute cache write, cache
/// read) for the Claude models Claude Code runs, by model id prefix. Each is only a default:
/// `[prices."<prefix>"]` in `providers.toml` replaces it or adds a model. Prefixes name model
/// families exactly, so a newer model is unpriced until someone gives its price.
pub const BUILTIN: &[(&str, Price)] = &[
    ("claude-opus-4-5", Price::per_million(5.0, 25.0, 6.25, 0.50)),
    ("claude-opus-4-1", Price::per_million(15.0, 75.0, 18.75, 1.50)),
    ("claude-opus-4-2025", Price::per_million(15.0, 75.0, 18.75, 1.50)),
    ("claude-sonnet-4-5", Price::per_million(3.0, 15.0, 3.75, 0.30)),
    ("claude-sonnet-4-2025", Price::per_million(3.0, 15.0, 3.75, 0.30)),
    ("claude-3-7-sonnet", Price::per_million(3.0, 15.0, 3.75, 0.30)),
    ("claude-haiku-4-5", Price::per_million(1.0, 5.0, 1.25, 0.10)),
    ("claude-3-5-haiku", Price::per_million(0.80, 4.0, 1.0, 0.08)),
];

/// Prices by model id prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceList {
    by_prefix: BTreeMap<String, Price>,
}

impl Default for PriceList {
    fn default() -> PriceList {
        PriceList { by_prefix: BUILTIN.iter().map(|(prefix, price)| ((*prefix).to_owned(), *price)).collect() }
    }
}

impl PriceList {
    /// Sets the price of the models whose id starts with `prefix` (replacing a built-in one).
    pub fn set(&mut self, prefix: String, price: Price) {
        self.by_prefix.insert(prefix, price);
    }

    /// The price of `model`: the one with the longest prefix of its id.
    pub fn of(&self, model: &str) -> Option<Price> {
        self.by_prefix
            .iter()
            .filter(|(prefix, _)| model.starts_with(prefix.as_str()))
            .max_by_key(|(p, _)| p.len())
            .map(|(_, p)| *p)
    }

    /// The cost of per-model sums: each model's tokens at its price.
    pub fn cost(&self, by_model: &BTreeMap<String, Usage>) -> Cost {
        let mut cost = Cost::default();
        for (model, usage) in by_model {
            let price = self.of(model);
            let usd = price.map(|p| p.of(usage));
            if let Some(usd) = usd {
                cost.usd = Some(cost.usd.unwrap_or(0.0) + usd);
            }
            if price.is_none() {
                cost.unpriced.push(model.clone());
            }
            cost.total.add(usage);
            cost.models.push(ModelCost { model: model.clone(), usage: *usage, cost_usd: usd });
        }
        // No tokens at all cost nothing; tokens of no priced model have no known cost (not 0).
        if by_model.is_empty() {
            cost.usd = Some(0.0);
        }
        cost
    }
}

/// Tokens and what they cost, per model and in all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"input_tokens": 12, "output_tokens": 3400, "cache_creation_input_tokens": 15000,
    "cache_read_input_tokens": 250000, "cost_usd": 0.2, "unpriced": [],
    "models": [{"model": "claude-sonnet-4-5-20250929", "input_tokens": 12, "output_tokens": 3400,
        "cache_creation_input_tokens": 15000, "cache_read_input_tokens": 250000, "cost_usd": 0.2}]}))]
pub struct Cost {
    /// The tokens of every model.
    #[serde(flatten)]
    pub total: Usage,
    /// USD, summed over the models that have a price (see `unpriced`); `null` when tokens were
    /// used and no model that used them has a price (the cost is unknown, not 0).
    #[serde(rename = "cost_usd")]
    pub usd: Option<f64>,
    /// Models with tokens but no price: their tokens are not in `cost_usd`.
    pub unpriced: Vec<String>,
    pub models: Vec<ModelCost>,
}

/// One model's tokens and their cost.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ModelCost {
    pub model: String,
    #[serde(flatten)]
    pub usage: Usage,
    /// USD; `null` when no price matches the model.
    pub cost_usd: Option<f64>,
}

impl ModelCost {
    /// In words: `claude-…: 1,234 tokens (… input, … output, … cache write, … cache read), $0.12`,
    /// or `no price for claude-…` in place of the amount.
    pub fn line(&self) -> String {
        let u = &self.usage;
        let amount = match self.cost_usd {
            Some(usd) => format!("${usd:.2}"),
            None => format!("no price for {}", self.model),
        };
        format!(
            "{}: {} tokens ({} input, {} output, {} cache write, {} cache read), {amount}",
            self.model,
            group_digits(u.total()),
            group_digits(u.input_tokens),
            group_digits(u.output_tokens),
            group_digits(u.cache_creation_input_tokens),
            group_digits(u.cache_read_input_tokens),
        )
    }
}

impl Cost {
    /// In a sentence: `$1.23 (12,345 tokens)`, with each unpriced model named.
    pub fn summary(&self) -> String {
        let tokens = group_digits(self.total.total());
        let mut text = match self.usd {
            Some(usd) => format!("${usd:.2} ({tokens} tokens)"),
            None => format!("cost unknown ({tokens} tokens)"),
        };
        for model in &self.unpriced {
            text.push_str(&format!("; no price for {model}"));
        }
        text
    }
}

/// `1234567` as `1,234,567`.
pub fn group_digits(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        out.insert(0, '-');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: i64, output: i64, write: i64, read: i64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_creation_input_tokens: write,
            cache_read_input_tokens: read,
        }
    }

    #[test]
    fn the_longest_prefix_prices_a_model_and_an_unknown_one_has_none() {
        let mut prices = PriceList::default();
        assert_eq!(prices.of("claude-opus-4-5-20251101").map(|p| p.input), Some(5.0));
        assert_eq!(prices.of("claude-opus-4-1-20250805").map(|p| p.input), Some(15.0));
        assert_eq!(prices.of("claude-sonnet-4-20250514").map(|p| p.output), Some(15.0));
        assert_eq!(prices.of("claude-opus-9"), None);
        prices.set("claude-opus".into(), Price::per_million(1.0, 2.0, 3.0, 4.0));
        assert_eq!(prices.of("claude-opus-9").map(|p| p.input), Some(1.0));
        assert_eq!(prices.of("claude-opus-4-5-20251101").map(|p| p.input), Some(5.0), "the longer prefix wins");
    }

    #[test]
    fn a_cost_sums_priced_models_and_names_the_unpriced_ones() {
        let by_model = BTreeMap::from([
            ("claude-sonnet-4-5-20250929".to_owned(), usage(1_000_000, 1_000_000, 1_000_000, 1_000_000)),
            ("mystery-1".to_owned(), usage(5, 5, 0, 0)),
        ]);
        let cost = PriceList::default().cost(&by_model);
        assert!((cost.usd.unwrap() - (3.0 + 15.0 + 3.75 + 0.30)).abs() < 1e-9, "{:?}", cost.usd);
        assert_eq!(cost.unpriced, ["mystery-1"]);
        assert_eq!(cost.total.total(), 4_000_010);
        assert_eq!(cost.models[1].cost_usd, None);
        assert_eq!(cost.summary(), "$22.05 (4,000,010 tokens); no price for mystery-1");

        let unknown = PriceList::default().cost(&BTreeMap::from([("mystery-1".to_owned(), usage(5, 5, 0, 0))]));
        assert_eq!(unknown.usd, None, "tokens of no priced model cost what no one knows, not 0");
        assert_eq!(unknown.summary(), "cost unknown (10 tokens); no price for mystery-1");
        assert_eq!(PriceList::default().cost(&BTreeMap::new()).usd, Some(0.0), "nothing used costs nothing");
    }
}
