//! What a sweep point is (issue 21): the coordinates of one test of a
//! benchmark matrix, and the axes of the matrix it belongs to. Plans and
//! the `--sweep` flag produce them, results.json carries them, the report
//! pivots on them. Pure data, and the expansion of a sweep into its points
//! (product, zip groups, order, names, the cap).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One coordinate of a sweep point: a parameter and the value it had.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct Coord {
    /// The parameter as the user named it (`frame_size`, `streams`, `dut`…).
    pub key: String,
    /// Its value as the user wrote it (`64`, `bidir`, `router`).
    pub value: String,
    /// The value as a number when it is one (for plots along this axis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<f64>,
}

/// Which sweep a test belongs to and where in it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, JsonSchema)]
pub struct SweepPoint {
    /// The sweep's name (the plan test's or the command's name).
    pub sweep: String,
    /// 0-based position in the sweep's expansion order.
    pub index: usize,
    /// Coordinates in the sweep's axis order.
    pub coords: Vec<Coord>,
}

/// A sweep of the run: its axes and how the report pivots it.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, JsonSchema)]
pub struct SweepInfo {
    pub name: String,
    /// Every axis, in expansion order (the first varies slowest).
    pub axes: Vec<String>,
    /// Axes shown as the pivot's rows (`--rows`, a plan's `rows`); empty:
    /// the report chooses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rows: Vec<String>,
    /// Axes shown as the pivot's columns (`--cols`, a plan's `cols`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cols: Vec<String>,
    /// The figure in each cell (`rx_gbps`, `pct_line`, `rx_pps`…); none:
    /// the report chooses by test kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cell: Option<String>,
    /// How many points the sweep has.
    pub points: usize,
}

// ---------------------------------------------------------------------------
// Expansion: axes and zip groups → the points of a sweep, in a stated order.

/// One swept parameter and its values, as the user wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Axis {
    pub key: String,
    pub values: Vec<String>,
}

/// What a sweep is before expansion: its axes in the order written, the
/// groups that move together, and the order the user asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SweepSpec {
    /// The sweep's name: a plan test's name or the command's.
    pub name: String,
    /// In the order written.
    pub axes: Vec<Axis>,
    /// Groups of axes (two or more each) whose values move together: the
    /// i-th point of the group takes the i-th value of each.
    pub zip: Vec<Vec<String>>,
    /// The expansion order, slowest first; axes it leaves out follow in
    /// the order written. Empty: the order written.
    pub order: Vec<String>,
}

/// Why a sweep cannot be expanded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SweepError {
    #[error("sweep axis '{0}' has no values: give at least one, e.g. {0}=64,1518")]
    Empty(String),
    #[error("'{0}' is swept twice: give each parameter one list of values")]
    Twice(String),
    #[error("zip names '{key}', which is not swept: zip groups name swept parameters ({axes})")]
    ZipUnknown { key: String, axes: String },
    #[error("zip group [{0}] has fewer than two parameters: a zip moves two or more together")]
    ZipAlone(String),
    #[error("'{0}' is in two zip groups (or twice in one): each parameter moves with one group")]
    ZipTwice(String),
    #[error(
        "zip moves '{a}' and '{b}' together, but '{a}' has {la} values and '{b}' has {lb}: \
         give them the same number of values, or take them out of the zip to sweep their product"
    )]
    ZipLengths {
        a: String,
        la: usize,
        b: String,
        lb: usize,
    },
    #[error("order names '{key}', which is not swept: order lists swept parameters ({axes})")]
    OrderUnknown { key: String, axes: String },
    #[error("order names '{0}' twice: list each swept parameter once")]
    OrderTwice(String),
    #[error(
        "the sweep \"{name}\" has {count} points, more than the {cap} a run may hold: \
         sweep fewer values, zip parameters that move together, or split it"
    )]
    TooMany {
        name: String,
        count: u128,
        cap: usize,
    },
}

/// One point of an expanded sweep: its test name and its coordinates.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// `"<sweep name> key=v key=v"`.
    pub name: String,
    pub point: SweepPoint,
}

impl Point {
    /// The value this point gives `key`.
    pub fn value(&self, key: &str) -> Option<&str> {
        self.point
            .coords
            .iter()
            .find(|c| c.key == key)
            .map(|c| c.value.as_str())
    }
}

/// A value as a number when it is written plainly as one (`64`, `1.5`,
/// `-3`); `10G`, `50%`, `imix` and `inf` are not.
pub fn plain_number(v: &str) -> Option<f64> {
    let t = v.trim();
    let plain = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E'))
        && t.chars().any(|c| c.is_ascii_digit());
    t.parse::<f64>().ok().filter(|x| plain && x.is_finite())
}

/// One step of the expansion: a single axis or a zip group (its members
/// move together, so they count as one dimension).
struct Dim {
    axes: Vec<usize>,
    len: usize,
}

impl SweepSpec {
    /// Axis names in expansion order (the first varies slowest; the
    /// members of a zip group are adjacent, in the group's order).
    pub fn axis_order(&self) -> Result<Vec<String>, SweepError> {
        Ok(self
            .dims()?
            .iter()
            .flat_map(|d| d.axes.iter().map(|&i| self.axes[i].key.clone()))
            .collect())
    }

    /// How many points the sweep has (saturating at `u128::MAX`).
    pub fn count(&self) -> Result<u128, SweepError> {
        Ok(self
            .dims()?
            .iter()
            .fold(1u128, |n, d| n.saturating_mul(d.len as u128)))
    }

    /// Which zip group each axis moves with (None: alone), after checking
    /// that each group has two or more known axes of one length, and that
    /// no axis is in two groups.
    fn zip_groups(&self) -> Result<Vec<Option<usize>>, SweepError> {
        let find = |k: &str| self.axes.iter().position(|a| a.key == k);
        let mut group = vec![None; self.axes.len()];
        for (g, members) in self.zip.iter().enumerate() {
            if members.len() < 2 {
                return Err(SweepError::ZipAlone(members.join(", ")));
            }
            for k in members {
                let i = find(k).ok_or_else(|| SweepError::ZipUnknown {
                    key: k.clone(),
                    axes: self.axis_names(),
                })?;
                if group[i].is_some() {
                    return Err(SweepError::ZipTwice(k.clone()));
                }
                group[i] = Some(g);
            }
            let first = &self.axes[find(&members[0]).unwrap_or_default()];
            for k in &members[1..] {
                let other = &self.axes[find(k).unwrap_or_default()];
                if other.values.len() != first.values.len() {
                    return Err(SweepError::ZipLengths {
                        a: first.key.clone(),
                        la: first.values.len(),
                        b: other.key.clone(),
                        lb: other.values.len(),
                    });
                }
            }
        }
        Ok(group)
    }

    /// The axes' keys, comma-separated, for an error that lists them.
    fn axis_names(&self) -> String {
        self.axes
            .iter()
            .map(|a| a.key.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn dims(&self) -> Result<Vec<Dim>, SweepError> {
        let find = |k: &str| self.axes.iter().position(|a| a.key == k);
        for (i, a) in self.axes.iter().enumerate() {
            if a.values.is_empty() {
                return Err(SweepError::Empty(a.key.clone()));
            }
            if self.axes[..i].iter().any(|b| b.key == a.key) {
                return Err(SweepError::Twice(a.key.clone()));
            }
        }
        let group = self.zip_groups()?;
        // The order: the user's, then the rest as written.
        let mut order: Vec<usize> = Vec::with_capacity(self.axes.len());
        for k in &self.order {
            let i = find(k).ok_or_else(|| SweepError::OrderUnknown {
                key: k.clone(),
                axes: self.axis_names(),
            })?;
            if order.contains(&i) {
                return Err(SweepError::OrderTwice(k.clone()));
            }
            order.push(i);
        }
        for i in 0..self.axes.len() {
            if !order.contains(&i) {
                order.push(i);
            }
        }
        // A zip group takes the place of its first member in the order.
        let mut dims: Vec<Dim> = Vec::new();
        let mut placed = vec![false; self.zip.len()];
        for i in order {
            match group[i] {
                None => dims.push(Dim {
                    axes: vec![i],
                    len: self.axes[i].values.len(),
                }),
                Some(g) if !placed[g] => {
                    placed[g] = true;
                    let axes: Vec<usize> = self.zip[g].iter().filter_map(|k| find(k)).collect();
                    dims.push(Dim {
                        len: self.axes[i].values.len(),
                        axes,
                    });
                }
                Some(_) => {}
            }
        }
        Ok(dims)
    }

    /// Every point, the first axis varying slowest; at most `cap` of them.
    pub fn expand(&self, cap: usize) -> Result<Vec<Point>, SweepError> {
        let dims = self.dims()?;
        let count = dims
            .iter()
            .fold(1u128, |n, d| n.saturating_mul(d.len as u128));
        if count > cap as u128 {
            return Err(SweepError::TooMany {
                name: self.name.clone(),
                count,
                cap,
            });
        }
        // `count` fits: it is at most `cap`.
        let count = count as usize;
        let mut points = Vec::with_capacity(count);
        for index in 0..count {
            // Mixed-radix digits of the index, the last dimension fastest.
            let mut rest = index;
            let mut digits = vec![0; dims.len()];
            for (d, dim) in dims.iter().enumerate().rev() {
                digits[d] = rest % dim.len;
                rest /= dim.len;
            }
            let coords: Vec<Coord> = dims
                .iter()
                .zip(&digits)
                .flat_map(|(dim, &j)| {
                    dim.axes.iter().map(move |&i| {
                        let a = &self.axes[i];
                        Coord {
                            key: a.key.clone(),
                            value: a.values[j].clone(),
                            number: plain_number(&a.values[j]),
                        }
                    })
                })
                .collect();
            let mut name = self.name.clone();
            for c in &coords {
                name.push_str(&format!(" {}={}", c.key, c.value));
            }
            points.push(Point {
                name,
                point: SweepPoint {
                    sweep: self.name.clone(),
                    index,
                    coords,
                },
            });
        }
        Ok(points)
    }

    /// The run's record of this sweep, with the pivot hints given.
    pub fn info(
        &self,
        rows: Vec<String>,
        cols: Vec<String>,
        cell: Option<String>,
    ) -> Result<SweepInfo, SweepError> {
        let points = self.count()?;
        Ok(SweepInfo {
            name: self.name.clone(),
            axes: self.axis_order()?,
            rows,
            cols,
            cell,
            points: usize::try_from(points).unwrap_or(usize::MAX),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(key: &str, values: &[&str]) -> Axis {
        Axis {
            key: key.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        }
    }

    fn spec(axes: Vec<Axis>) -> SweepSpec {
        SweepSpec {
            name: "udp".into(),
            axes,
            ..Default::default()
        }
    }

    fn names(points: &[Point]) -> Vec<&str> {
        points.iter().map(|p| p.name.as_str()).collect()
    }

    #[test]
    fn product_first_axis_slowest() {
        let s = spec(vec![
            axis("frame_size", &["64", "1518"]),
            axis("rate", &["1Mpps", "2Mpps", "3Mpps"]),
        ]);
        let p = s.expand(100).unwrap();
        assert_eq!(
            names(&p),
            [
                "udp frame_size=64 rate=1Mpps",
                "udp frame_size=64 rate=2Mpps",
                "udp frame_size=64 rate=3Mpps",
                "udp frame_size=1518 rate=1Mpps",
                "udp frame_size=1518 rate=2Mpps",
                "udp frame_size=1518 rate=3Mpps",
            ]
        );
        assert_eq!(p[4].point.index, 4);
        assert_eq!(p[4].point.sweep, "udp");
        assert_eq!(p[4].point.coords[0].number, Some(1518.0));
        assert_eq!(p[4].point.coords[1].number, None);
        assert_eq!(p[4].value("rate"), Some("2Mpps"));
        assert_eq!(s.count().unwrap(), 6);
    }

    #[test]
    fn order_puts_named_axes_first() {
        let mut s = spec(vec![
            axis("a", &["1", "2"]),
            axis("b", &["x", "y"]),
            axis("c", &["p"]),
        ]);
        s.order = vec!["b".into()];
        assert_eq!(s.axis_order().unwrap(), ["b", "a", "c"]);
        let p = s.expand(100).unwrap();
        assert_eq!(
            names(&p),
            [
                "udp b=x a=1 c=p",
                "udp b=x a=2 c=p",
                "udp b=y a=1 c=p",
                "udp b=y a=2 c=p"
            ]
        );
        s.order = vec!["d".into()];
        assert!(matches!(
            s.expand(100),
            Err(SweepError::OrderUnknown { .. })
        ));
        s.order = vec!["a".into(), "a".into()];
        assert_eq!(s.expand(100), Err(SweepError::OrderTwice("a".into())));
    }

    #[test]
    fn zip_moves_together() {
        let mut s = spec(vec![
            axis("frame_size", &["64", "1518"]),
            axis("dut", &["route", "nat"]),
            axis("rate", &["14Mpps", "800kpps"]),
        ]);
        s.zip = vec![vec!["frame_size".into(), "rate".into()]];
        assert_eq!(s.axis_order().unwrap(), ["frame_size", "rate", "dut"]);
        let p = s.expand(100).unwrap();
        assert_eq!(
            names(&p),
            [
                "udp frame_size=64 rate=14Mpps dut=route",
                "udp frame_size=64 rate=14Mpps dut=nat",
                "udp frame_size=1518 rate=800kpps dut=route",
                "udp frame_size=1518 rate=800kpps dut=nat",
            ]
        );
        // The group sits where its first member is in the order.
        s.order = vec!["dut".into()];
        let p = s.expand(100).unwrap();
        assert_eq!(p[1].name, "udp dut=route frame_size=1518 rate=800kpps");
    }

    #[test]
    fn zip_errors_name_both_lengths() {
        let mut s = spec(vec![
            axis("frame_size", &["64", "512", "1518"]),
            axis("rate", &["1Mpps", "2Mpps"]),
        ]);
        s.zip = vec![vec!["frame_size".into(), "rate".into()]];
        let e = s.expand(100).unwrap_err();
        assert_eq!(
            e,
            SweepError::ZipLengths {
                a: "frame_size".into(),
                la: 3,
                b: "rate".into(),
                lb: 2
            }
        );
        let text = e.to_string();
        assert!(
            text.contains("3 values") && text.contains("has 2"),
            "{text}"
        );
        s.zip = vec![vec!["frame_size".into(), "flows".into()]];
        assert!(s
            .expand(100)
            .unwrap_err()
            .to_string()
            .contains("'flows', which is not swept"));
        s.zip = vec![vec!["rate".into()]];
        assert!(matches!(s.expand(100), Err(SweepError::ZipAlone(_))));
        s.axes[1].values.push("3Mpps".into());
        s.zip = vec![
            vec!["rate".into(), "frame_size".into()],
            vec!["rate".into(), "frame_size".into()],
        ];
        assert_eq!(s.expand(100), Err(SweepError::ZipTwice("rate".into())));
    }

    #[test]
    fn empty_and_repeated_axes() {
        let s = spec(vec![axis("a", &[])]);
        assert_eq!(s.expand(10), Err(SweepError::Empty("a".into())));
        let s = spec(vec![axis("a", &["1"]), axis("a", &["2"])]);
        assert_eq!(s.expand(10), Err(SweepError::Twice("a".into())));
    }

    #[test]
    fn cap_counts_before_expanding() {
        let big: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = big.iter().map(String::as_str).collect();
        let s = spec(vec![
            axis("a", &refs),
            axis("b", &refs),
            axis("c", &refs),
            axis("d", &refs),
        ]);
        let e = s.expand(10_000).unwrap_err();
        assert!(
            matches!(e, SweepError::TooMany { count, cap: 10_000, .. } if count == 1_000_000_000_000),
            "{e:?}"
        );
        assert!(e.to_string().contains("1000000000000 points"), "{e}");
        let s = spec(vec![axis("a", &["1", "2"]), axis("b", &["1", "2"])]);
        assert_eq!(s.expand(4).unwrap().len(), 4);
        assert!(s.expand(3).is_err());
    }

    #[test]
    fn numbers_only_when_plain() {
        assert_eq!(plain_number("64"), Some(64.0));
        assert_eq!(plain_number("1.5"), Some(1.5));
        assert_eq!(plain_number("-3"), Some(-3.0));
        for v in ["10G", "50%", "imix", "inf", "NaN", "", "route", "1e"] {
            assert_eq!(plain_number(v), None, "{v}");
        }
    }

    #[test]
    fn info_lists_axes_in_expansion_order() {
        let mut s = spec(vec![axis("a", &["1", "2"]), axis("b", &["x"])]);
        s.order = vec!["b".into()];
        let i = s
            .info(vec!["a".into()], vec!["b".into()], Some("rx_pps".into()))
            .unwrap();
        assert_eq!(i.axes, ["b", "a"]);
        assert_eq!(i.points, 2);
        assert_eq!(i.rows, ["a"]);
        assert_eq!(i.cell.as_deref(), Some("rx_pps"));
    }
}
