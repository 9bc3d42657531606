//! Lays a wish's execution groups out as a drawing: each group in the column after its deepest
//! dependency, arrows from each dependency to its dependents. Pure: positions in, SVG numbers out;
//! the template draws them.

use std::collections::HashMap;

use crate::db::wishes::Group;
use crate::domain::task::TaskStatus;
use crate::pages::view::{truncate, words};

const WIDTH: i32 = 184;
const HEIGHT: i32 = 54;
const GAP_X: i32 = 56;
const GAP_Y: i32 = 18;
const PAD: i32 = 6;

/// One group as a box.
pub struct Node {
    pub key: String,
    pub title: String,
    pub status: &'static str,
    pub status_label: String,
    pub x: i32,
    pub y: i32,
    pub width: i32,
    pub height: i32,
}

/// One dependency as an arrow; `met` when the dependency is done.
pub struct Edge {
    pub path: String,
    pub met: bool,
}

pub struct Dag {
    pub width: i32,
    pub height: i32,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
}

/// Columns by depth (a group sits one column right of its deepest dependency), groups within a
/// column by key. `nodes` come in that order: column by column, top to bottom.
pub fn layout(groups: &[Group]) -> Dag {
    let index: HashMap<&str, usize> = groups.iter().enumerate().map(|(i, g)| (g.key.as_str(), i)).collect();
    let mut depth: Vec<Option<usize>> = vec![None; groups.len()];
    for i in 0..groups.len() {
        depth_of(i, groups, &index, &mut depth, &mut vec![false; groups.len()]);
    }
    let mut order: Vec<usize> = (0..groups.len()).collect();
    order.sort_by(|&a, &b| (depth[a], &groups[a].key).cmp(&(depth[b], &groups[b].key)));
    let mut rows_in_column: HashMap<usize, i32> = HashMap::new();
    let mut position = vec![(0, 0); groups.len()];
    let mut nodes = Vec::with_capacity(groups.len());
    for &i in &order {
        let group = &groups[i];
        let column = depth[i].unwrap_or(0);
        let row = rows_in_column.entry(column).or_insert(0);
        let (x, y) = (PAD + column as i32 * (WIDTH + GAP_X), PAD + *row * (HEIGHT + GAP_Y));
        position[i] = (x, y);
        let done = group.status == TaskStatus::Done;
        nodes.push(Node {
            key: group.key.clone(),
            title: truncate(&group.title, 26),
            status: group.status.as_str(),
            status_label: format!("{}{}", if done { "✓ " } else { "" }, words(group.status.as_str())),
            x,
            y,
            width: WIDTH,
            height: HEIGHT,
        });
        *row += 1;
    }
    let mut edges = Vec::new();
    for &i in &order {
        for dependency in &groups[i].depends_on {
            let Some(&d) = index.get(dependency.as_str()) else { continue };
            let ((fx, fy), (tx, ty)) = (position[d], position[i]);
            let (x1, y1) = (fx + WIDTH, fy + HEIGHT / 2);
            let (x2, y2) = (tx - 4, ty + HEIGHT / 2);
            let bend = GAP_X / 2;
            edges.push(Edge {
                path: format!("M{x1} {y1} C{} {y1} {} {y2} {x2} {y2}", x1 + bend, x2 - bend),
                met: groups[d].status == TaskStatus::Done,
            });
        }
    }
    let width = nodes.iter().map(|n| n.x + WIDTH).max().unwrap_or(0) + PAD;
    let height = nodes.iter().map(|n| n.y + HEIGHT).max().unwrap_or(0) + PAD;
    Dag { width, height, nodes, edges }
}

/// The longest chain of dependencies below group `i`. A plan is acyclic (checked on creation);
/// a cycle here anyway would put its groups in column 0 rather than loop.
fn depth_of(
    i: usize,
    groups: &[Group],
    index: &HashMap<&str, usize>,
    depth: &mut Vec<Option<usize>>,
    visiting: &mut Vec<bool>,
) -> usize {
    if let Some(d) = depth[i] {
        return d;
    }
    if visiting[i] {
        return 0;
    }
    visiting[i] = true;
    let d = groups[i]
        .depends_on
        .iter()
        .filter_map(|key| index.get(key.as_str()))
        .map(|&j| depth_of(j, groups, index, depth, visiting) + 1)
        .max()
        .unwrap_or(0);
    visiting[i] = false;
    depth[i] = Some(d);
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(key: &str, depends_on: &[&str], status: TaskStatus) -> Group {
        Group {
            key: key.to_owned(),
            task_id: uuid::Uuid::new_v4(),
            title: format!("Group {key}"),
            goal: String::new(),
            status,
            depends_on: depends_on.iter().map(|s| (*s).to_owned()).collect(),
            assignee: None,
            result: None,
            iterations: 0,
            max_iterations: 10,
            branch: None,
            merge_commit: None,
        }
    }

    #[test]
    fn each_group_sits_right_of_its_deepest_dependency() {
        let groups = [
            group("api", &[], TaskStatus::Done),
            group("db", &[], TaskStatus::InProgress),
            group("ui", &["api"], TaskStatus::Ready),
            group("e2e", &["ui", "db"], TaskStatus::Blocked),
        ];
        let dag = layout(&groups);
        let keys: Vec<&str> = dag.nodes.iter().map(|n| n.key.as_str()).collect();
        assert_eq!(keys, ["api", "db", "ui", "e2e"], "column by column, by key within one");
        let x: Vec<i32> = dag.nodes.iter().map(|n| n.x).collect();
        assert_eq!(x[0], x[1], "api and db have no dependencies");
        assert!(x[2] > x[0] && x[3] > x[2], "ui after api, e2e after ui: {x:?}");
        assert_ne!(dag.nodes[0].y, dag.nodes[1].y, "two groups of one column do not overlap");
        assert_eq!(dag.edges.len(), 3);
        assert!(dag.edges[0].met, "ui's dependency api is done");
        assert!(!dag.edges[1].met && !dag.edges[2].met);
        assert!(dag.width >= x[3] + WIDTH && dag.height >= HEIGHT * 2);
        assert_eq!(dag.nodes[0].status_label, "✓ done");
        assert_eq!(dag.nodes[1].status_label, "in progress");
    }

    #[test]
    fn a_cycle_does_not_hang_the_layout() {
        let groups = [group("a", &["b"], TaskStatus::Blocked), group("b", &["a"], TaskStatus::Blocked)];
        assert_eq!(layout(&groups).nodes.len(), 2);
    }
}
