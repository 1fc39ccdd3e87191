//! Work spread over a few threads: the same function over many independent items (a batch's
//! checks, its files staged and fsynced), on as many threads as the machine has cores, the
//! results in the items' order.

use std::num::NonZeroUsize;

/// The most threads [`map`] uses: the machine's cores, at most 8.
pub(crate) fn workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .clamp(1, 8)
}

/// `f` applied to every item, on up to [`workers`] scoped threads (each a run of consecutive
/// items), the results in the order of `items`. Fewer than two items, or one core: on the
/// calling thread. A panic in `f` is the caller's panic.
pub(crate) fn map<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync) -> Vec<R> {
    let threads = workers().min(items.len());
    if threads <= 1 {
        return items.into_iter().map(f).collect();
    }
    let per = items.len().div_ceil(threads);
    let mut runs: Vec<Vec<T>> = Vec::with_capacity(threads);
    let mut items = items.into_iter();
    loop {
        let run: Vec<T> = items.by_ref().take(per).collect();
        if run.is_empty() {
            break;
        }
        runs.push(run);
    }
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = runs
            .into_iter()
            .map(|run| s.spawn(move || run.into_iter().map(f).collect::<Vec<R>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_come_in_the_items_order() {
        for n in [0usize, 1, 2, 3, 7, 100, 1001] {
            let items: Vec<usize> = (0..n).collect();
            let out = map(items, |i| (i, std::thread::current().id()));
            assert_eq!(
                out.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
                (0..n).collect::<Vec<_>>()
            );
        }
    }

    #[test]
    fn borrowed_items_and_errors_stay_with_their_item() {
        let names = ["a", "bad", "c", "bad2"];
        let out = map(names.iter().collect(), |n| {
            if n.starts_with("bad") {
                Err(format!("{n} failed"))
            } else {
                Ok(n.len())
            }
        });
        assert_eq!(
            out,
            vec![
                Ok(1),
                Err("bad failed".into()),
                Ok(1),
                Err("bad2 failed".into())
            ]
        );
    }
}
