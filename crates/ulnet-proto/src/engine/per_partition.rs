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
    /// `count` values (at least one) made by `make`.
    pub(crate) fn new(count: u32, mut make: impl FnMut() -> T) -> Self {
        let first = make();
        Self { first, rest: (1..count.max(1)).map(|_| make()).collect() }
    }

    /// Partition 0's.
    #[inline]
    pub(crate) fn first(&self) -> &T {
        &self.first
    }

    /// Partition `cpt`'s; `None` for one the node lacks.
    #[inline]
    pub(crate) fn get(&self, cpt: usize) -> Option<&T> {
        match cpt.checked_sub(1) {
            None => Some(&self.first),
            Some(index) => self.rest.get(index),
        }
    }

    /// Partition `cpt`'s, to change; `None` for one the node lacks.
    #[inline]
    pub(crate) fn get_mut(&mut self, cpt: usize) -> Option<&mut T> {
        match cpt.checked_sub(1) {
            None => Some(&mut self.first),
            Some(index) => self.rest.get_mut(index),
        }
    }

    /// Partition `cpt`'s, to change, or partition 0's for one the node lacks.
    #[inline]
    pub(crate) fn get_or_first_mut(&mut self, cpt: usize) -> &mut T {
        match cpt.checked_sub(1).and_then(|index| self.rest.get_mut(index)) {
            Some(value) => value,
            None => &mut self.first,
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        std::iter::once(&self.first).chain(&self.rest)
    }

    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        std::iter::once(&mut self.first).chain(&mut self.rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_reached_by_index_and_in_order() {
        let mut next = 0;
        let mut values = PerPartition::new(3, || {
            next += 1;
            next
        });
        assert_eq!((values.get(0), values.get(2), values.get(3)), (Some(&1), Some(&3), None));
        *values.get_or_first_mut(7) += 10;
        *values.get_or_first_mut(1) += 10;
        assert_eq!(values.iter().copied().collect::<Vec<_>>(), [11, 12, 3]);
        values.iter_mut().for_each(|value| *value = 0);
        assert!(values.get_mut(2).is_some_and(|value| *value == 0));
        assert_eq!(PerPartition::new(0, || ()).iter().count(), 1);
    }
}
