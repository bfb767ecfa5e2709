//! Node selectors: `group` (every node of it), `group[3]` (one), `group[2-5]` (a range).

use super::Scenario;

/// A parsed selector; indices are within the group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSelector {
    pub group: String,
    /// First and last index, inclusive; `None` for the whole group.
    pub range: Option<(u64, u64)>,
}

/// A selector that does not parse or names nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("{0:?} is not a node selector (group, group[3], group[2-5])")]
    Syntax(String),
    #[error("{0:?}: no node group of that name")]
    UnknownGroup(String),
    #[error("{selector:?}: group {group:?} has {count} nodes")]
    OutOfRange { selector: String, group: String, count: u64 },
}

impl NodeSelector {
    pub fn parse(text: &str) -> Result<Self, SelectError> {
        let syntax = || SelectError::Syntax(text.to_owned());
        let Some((group, rest)) = text.split_once('[') else {
            return if is_name(text) {
                Ok(Self { group: text.to_owned(), range: None })
            } else {
                Err(syntax())
            };
        };
        let inner = rest.strip_suffix(']').ok_or_else(syntax)?;
        let (first, last) = match inner.split_once('-') {
            Some((first, last)) => (first, last),
            None => (inner, inner),
        };
        let number = |text: &str| -> Result<u64, SelectError> {
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(syntax());
            }
            text.parse().map_err(|_| syntax())
        };
        let (first, last) = (number(first)?, number(last)?);
        if !is_name(group) || first > last {
            return Err(syntax());
        }
        Ok(Self { group: group.to_owned(), range: Some((first, last)) })
    }

    /// How many nodes it selects in `scenario` (an error if it names nothing).
    pub fn count(&self, scenario: &Scenario) -> Result<u64, SelectError> {
        let group = scenario
            .nodes
            .iter()
            .find(|group| group.name == self.group)
            .ok_or_else(|| SelectError::UnknownGroup(self.group.clone()))?;
        match self.range {
            None => Ok(group.count),
            Some((first, last)) if last < group.count => Ok(last - first + 1),
            Some((first, last)) => Err(SelectError::OutOfRange {
                selector: format!("{}[{first}-{last}]", self.group),
                group: group.name.clone(),
                count: group.count,
            }),
        }
    }
}

/// A group or switch name: a letter, then letters, digits, `-` and `_`.
pub fn is_name(text: &str) -> bool {
    let mut bytes = text.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        && text.len() <= 64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors() {
        assert_eq!(
            NodeSelector::parse("client"),
            Ok(NodeSelector { group: "client".into(), range: None })
        );
        assert_eq!(
            NodeSelector::parse("client[3]"),
            Ok(NodeSelector { group: "client".into(), range: Some((3, 3)) })
        );
        assert_eq!(
            NodeSelector::parse("c_1[2-5]"),
            Ok(NodeSelector { group: "c_1".into(), range: Some((2, 5)) })
        );
        for bad in ["", "1abc", "a[", "a[5-2]", "a[x]", "a[1-]", "a b", "a[-1]"] {
            assert!(NodeSelector::parse(bad).is_err(), "{bad}");
        }
    }
}
