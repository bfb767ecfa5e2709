//! One value per CPU partition, partition 0's kept inline: with one partition (the default)
//! reaching it costs no pointer chase (BENCHMARKS.md, "The core lock's serial share": a slab
//! behind a `Vec` added measurable held time per small RPC).

/// A `T` for each partition, in partition order.
#[derive(Debug)]
pub(crate) struct PerPartition<T> {
    first: T,
    rest: Vec<T>,
}

impl<T> PerPartition<T> {
    /// `count` values (at least one), partition `cpt`'s made by `make(cpt)`.
    pub(crate) fn from_fn(count: u32, mut make: impl FnMut(u32) -> T) -> Self {
        let first = make(0);
        Self { first, rest: (1..count.max(1)).map(make).collect() }
    }

    /// Partition 0's, and the others in order.
    pub(crate) fn split_first(&self) -> (&T, std::slice::Iter<'_, T>) {
        (&self.first, self.rest.iter())
    }

    /// Partition 0's, and the others in order, to change.
    pub(crate) fn split_first_mut(&mut self) -> (&mut T, std::slice::IterMut<'_, T>) {
        (&mut self.first, self.rest.iter_mut())
    }

    /// Partition `cpt`'s.
    pub(crate) fn get(&self, cpt: u32) -> Option<&T> {
        match cpt {
            0 => Some(&self.first),
            _ => self.rest.get(usize::try_from(cpt - 1).ok()?),
        }
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        std::iter::once(&mut self.first).chain(&mut self.rest)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        std::iter::once(&self.first).chain(&self.rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_made_by_index_and_kept_in_order() {
        let mut values = PerPartition::from_fn(3, |cpt| cpt + 1);
        let (first, rest) = values.split_first();
        assert_eq!((*first, rest.copied().collect::<Vec<_>>()), (1, vec![2, 3]));
        let (first, rest) = values.split_first_mut();
        *first = 5;
        rest.for_each(|value| *value = 6);
        assert_eq!(values.iter().copied().collect::<Vec<_>>(), [5, 6, 6]);
        assert_eq!(PerPartition::from_fn(0, |_| ()).iter().count(), 1);
    }
}
