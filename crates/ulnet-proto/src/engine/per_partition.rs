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
        let (first, rest) = values.split_first();
        assert_eq!((*first, rest.copied().collect::<Vec<_>>()), (1, vec![2, 3]));
        *values.get_or_first_mut(7) += 10;
        *values.get_or_first_mut(1) += 10;
        assert_eq!(values.iter().copied().collect::<Vec<_>>(), [11, 12, 3]);
        values.iter_mut().for_each(|value| *value = 0);
        let (first, rest) = values.split_first_mut();
        *first = 5;
        rest.for_each(|value| *value = 6);
        assert_eq!(values.iter().copied().collect::<Vec<_>>(), [5, 6, 6]);
        assert_eq!(PerPartition::new(0, || ()).iter().count(), 1);
        let indexed = PerPartition::from_fn(3, |cpt| cpt * 10);
        assert_eq!(indexed.iter().copied().collect::<Vec<_>>(), [0, 10, 20]);
    }
}
