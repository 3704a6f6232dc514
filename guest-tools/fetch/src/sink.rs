//! An html5ever tree sink that stops growing the DOM after a number of elements.
//!
//! A hostile page can make the HTML tree builder create far more elements than it has tags:
//! a few thousand unclosed formatting elements (`<b x=1><b x=2>…`) are cloned again after
//! every block that closes them, so a 1 MiB page can ask for hundreds of millions of nodes.
//! [`Capped`] builds a normal [`RcDom`] until [`Capped::limit`] elements exist; after that
//! every new element is one shared placeholder per tag name and every tree change is ignored,
//! so neither memory nor time grows with what the page asks for. Deep nesting costs time too
//! (the tree builder scans its stack of open elements for every tag), so the same happens once
//! an element would sit deeper than [`Capped::max_depth`]. The caller stops feeding the parser
//! once [`Budget::over`] is set and says the page was cut.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use html5ever::interface::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::tendril::StrTendril;
use html5ever::{local_name, ns, Attribute, ExpandedName, QualName};
use markup5ever_rcdom::{Handle, Node, NodeData, RcDom};

/// Placeholders kept (one per tag name); other names share the last one.
const MAX_PLACEHOLDERS: usize = 64;

/// What a parse has used, shared with the code feeding the parser.
#[derive(Debug, Default)]
pub struct Budget {
    /// Elements created so far (placeholders included).
    pub elements: Cell<usize>,
    /// Set once a limit was reached: the tree no longer changes.
    pub over: Cell<bool>,
    /// Set when the limit reached was the nesting depth.
    pub too_deep: Cell<bool>,
}

/// The sink: an [`RcDom`] with an element limit.
pub struct Capped {
    /// The tree being built.
    pub dom: RcDom,
    /// The most real elements created.
    pub limit: usize,
    /// The deepest an element may be placed.
    pub max_depth: u32,
    /// Shared with the feeder.
    pub budget: Rc<Budget>,
    placeholders: RefCell<Vec<Handle>>,
    /// Each placed element's depth, by address (the document is depth 0).
    depths: RefCell<HashMap<usize, u32>>,
    /// The name given for a node that is not an element (never asked for in practice).
    neutral: QualName,
}

impl Capped {
    /// A sink for one document.
    pub fn new(limit: usize, max_depth: u32, budget: Rc<Budget>) -> Self {
        Capped {
            dom: RcDom::default(),
            limit,
            max_depth,
            budget,
            placeholders: RefCell::new(Vec::new()),
            depths: RefCell::new(HashMap::new()),
            neutral: QualName::new(None, ns!(html), local_name!("span")),
        }
    }

    fn over(&self) -> bool {
        self.budget.over.get()
    }

    fn depth_of(&self, node: &Handle) -> u32 {
        let key = Rc::as_ptr(node) as usize;
        self.depths.borrow().get(&key).copied().unwrap_or(0)
    }

    /// Note where `child` goes (under a node at `parent_depth`); past the depth limit the
    /// budget is spent.
    fn place(&self, parent_depth: u32, child: &NodeOrText<Handle>) {
        if let NodeOrText::AppendNode(c) = child {
            if matches!(c.data, NodeData::Element { .. }) {
                let depth = parent_depth.saturating_add(1);
                if depth > self.max_depth {
                    self.budget.over.set(true);
                    self.budget.too_deep.set(true);
                }
                self.depths
                    .borrow_mut()
                    .insert(Rc::as_ptr(c) as usize, depth);
            }
        }
    }

    fn placeholder(&self, name: QualName, flags: ElementFlags) -> Handle {
        let mut held = self.placeholders.borrow_mut();
        let found = held.iter().find(|h| match &h.data {
            NodeData::Element { name: n, .. } => *n == name,
            _ => false,
        });
        if let Some(h) = found {
            return h.clone();
        }
        if held.len() >= MAX_PLACEHOLDERS {
            if let Some(last) = held.last() {
                return last.clone();
            }
        }
        let h = self.dom.create_element(name, Vec::new(), flags);
        held.push(h.clone());
        h
    }
}

impl TreeSink for Capped {
    type Handle = Handle;
    type Output = Self;
    type ElemName<'a>
        = ExpandedName<'a>
    where
        Self: 'a;

    fn finish(self) -> Self {
        self
    }

    fn parse_error(&self, _msg: Cow<'static, str>) {
        // Malformed pages are the norm; the errors are not kept (they would only cost memory).
    }

    fn get_document(&self) -> Handle {
        self.dom.get_document()
    }

    fn elem_name<'a>(&'a self, target: &'a Handle) -> ExpandedName<'a> {
        match &target.data {
            NodeData::Element { name, .. } => name.expanded(),
            // The tree builder only asks about elements; a neutral answer otherwise.
            _ => self.neutral.expanded(),
        }
    }

    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> Handle {
        let made = self.budget.elements.get().saturating_add(1);
        self.budget.elements.set(made);
        if self.over() || made > self.limit {
            self.budget.over.set(true);
            return self.placeholder(name, flags);
        }
        self.dom.create_element(name, attrs, flags)
    }

    fn create_comment(&self, text: StrTendril) -> Handle {
        // Comments are never shown: keep them empty.
        drop(text);
        Node::new(NodeData::Comment {
            contents: StrTendril::new(),
        })
    }

    fn create_pi(&self, target: StrTendril, data: StrTendril) -> Handle {
        drop((target, data));
        Node::new(NodeData::Comment {
            contents: StrTendril::new(),
        })
    }

    fn append(&self, parent: &Handle, child: NodeOrText<Handle>) {
        if !self.over() {
            self.place(self.depth_of(parent), &child);
            self.dom.append(parent, child);
        }
    }

    fn append_based_on_parent_node(
        &self,
        element: &Handle,
        prev_element: &Handle,
        child: NodeOrText<Handle>,
    ) {
        if !self.over() {
            let has_parent = {
                let p = element.parent.take();
                let has = p.is_some();
                element.parent.set(p);
                has
            };
            if has_parent {
                self.append_before_sibling(element, child);
            } else {
                self.append(prev_element, child);
            }
        }
    }

    fn append_doctype_to_document(
        &self,
        name: StrTendril,
        public_id: StrTendril,
        system_id: StrTendril,
    ) {
        if !self.over() {
            self.dom
                .append_doctype_to_document(name, public_id, system_id);
        }
    }

    fn mark_script_already_started(&self, node: &Handle) {
        self.dom.mark_script_already_started(node);
    }

    fn get_template_contents(&self, target: &Handle) -> Handle {
        match &target.data {
            NodeData::Element {
                template_contents, ..
            } => match template_contents.borrow().as_ref() {
                Some(c) => c.clone(),
                None => self.dom.get_document(),
            },
            _ => self.dom.get_document(),
        }
    }

    fn same_node(&self, x: &Handle, y: &Handle) -> bool {
        Rc::ptr_eq(x, y)
    }

    fn set_quirks_mode(&self, mode: QuirksMode) {
        self.dom.set_quirks_mode(mode);
    }

    fn append_before_sibling(&self, sibling: &Handle, new_node: NodeOrText<Handle>) {
        if self.over() {
            return;
        }
        // rcdom insists on a parent; the tree builder promises one, but never trap on it.
        let has_parent = {
            let p = sibling.parent.take();
            let has = p.as_ref().is_some_and(|w| w.upgrade().is_some());
            sibling.parent.set(p);
            has
        };
        if has_parent {
            self.place(self.depth_of(sibling).saturating_sub(1), &new_node);
            self.dom.append_before_sibling(sibling, new_node);
        }
    }

    fn add_attrs_if_missing(&self, target: &Handle, attrs: Vec<Attribute>) {
        if !self.over() && matches!(target.data, NodeData::Element { .. }) {
            self.dom.add_attrs_if_missing(target, attrs);
        }
    }

    fn remove_from_parent(&self, target: &Handle) {
        if !self.over() {
            self.dom.remove_from_parent(target);
        }
    }

    fn reparent_children(&self, node: &Handle, new_parent: &Handle) {
        if !self.over() && !Rc::ptr_eq(node, new_parent) {
            self.dom.reparent_children(node, new_parent);
        }
    }

    fn is_mathml_annotation_xml_integration_point(&self, handle: &Handle) -> bool {
        match &handle.data {
            NodeData::Element {
                mathml_annotation_xml_integration_point,
                ..
            } => *mathml_annotation_xml_integration_point,
            _ => false,
        }
    }

    // `maybe_clone_an_option_into_selectedcontent` keeps its default (nothing): `<select>` and
    // its options are dropped from the output anyway, and the copies would bypass the limit.
}
