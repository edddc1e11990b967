//! Finding a default route: the fewest links between two nodes.

use super::LinkSpec;
use std::collections::VecDeque;

/// The route with the fewest links from `from` to `to` (breadth-first; links
/// explored in declaration order, so ties go to the earlier link).
pub(crate) fn shortest_route(links: &[LinkSpec], from: &str, to: &str) -> Option<Vec<usize>> {
    if from == to {
        return Some(Vec::new());
    }
    // For each node reached: the link that first reached it.
    let mut came_by: Vec<(&str, usize)> = Vec::new();
    let mut seen: Vec<&str> = vec![from];
    let mut frontier: VecDeque<&str> = VecDeque::from([from]);
    while let Some(at) = frontier.pop_front() {
        for (i, l) in links.iter().enumerate() {
            if l.from != at || seen.contains(&l.to.as_str()) {
                continue;
            }
            seen.push(&l.to);
            came_by.push((&l.to, i));
            if l.to == to {
                let mut route = vec![i];
                let mut node = links[i].from.as_str();
                while node != from {
                    let &(_, j) = came_by.iter().find(|(n, _)| *n == node)?;
                    route.push(j);
                    node = links[j].from.as_str();
                }
                route.reverse();
                return Some(route);
            }
            frontier.push_back(&l.to);
        }
    }
    None
}
