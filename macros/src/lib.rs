//! The attributes of `reel`: [`macro@tool`] declares a tool function with
//! its spec, [`macro@schema`] derives what a tool's input, output or
//! question type needs. Use them through `reel` (`#[reel::tool]`,
//! `#[reel::schema]`), which re-exports them with the crates their
//! expansions name: a tool crate depends on `reel` alone.

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as Tokens};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, Expr, ExprArray, FnArg, Item, ItemFn, Lit, LitBool, LitStr, ReturnType};

/// Declares a tool: on `async fn name(ctx: ToolContext, args: Args) ->
/// Result<Out, ToolError>` (or a plain `fn`, for a sync tool) it keeps
/// the function and adds `fn name_tool() -> reel::tools::TypedTool<Args,
/// Out>`, the tool typed with its spec, to add to a host's `Tools`
/// (`Tools::new().with(name_tool())`): registration is explicit, there is
/// no global inventory.
///
/// The spec: the name is the function's unless `name = ".."` says
/// otherwise; the description is the doc comment (or `description =
/// ".."`); the input schema is derived from `Args` and the output schema
/// from `Out`, the same types the function takes and returns, so they
/// cannot disagree. Further arguments: `id = ".."`, `title = ".."`,
/// `needs = ["github"]`, `wants = ["plan"]`, and MCP's hints
/// `read_only`, `destructive`, `idempotent`, `open_world` (each alone
/// means `true`; `destructive = false` says `false`).
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let original: Tokens = item.clone().into();
    match expand_tool(attr.into(), item.into()) {
        Ok(tokens) => tokens.into(),
        Err(e) => {
            let mut out = original;
            out.extend(e.to_compile_error());
            out.into()
        }
    }
}

/// Derives serde's `Serialize` and `Deserialize` and schemars'
/// `JsonSchema` for a struct or enum through `reel`'s own copies of those
/// crates, so that a tool crate needs neither as a dependency: the input,
/// output and question types of tools. Serde's and schemars' field
/// attributes (`#[serde(rename = "..")]`, ...) work as usual. Do not
/// derive any of the three again on the same type.
#[proc_macro_attribute]
pub fn schema(attr: TokenStream, item: TokenStream) -> TokenStream {
    let attr: Tokens = attr.into();
    let item: Tokens = item.into();
    if !attr.is_empty() {
        return syn::Error::new(attr.span(), "#[reel::schema] takes no arguments")
            .to_compile_error()
            .into();
    }
    quote! {
        #[derive(
            ::reel::__private::serde::Serialize,
            ::reel::__private::serde::Deserialize,
            ::reel::__private::schemars::JsonSchema
        )]
        #[serde(crate = "::reel::__private::serde")]
        #[schemars(crate = "::reel::__private::schemars")]
        #item
    }
    .into()
}

const SHAPE: &str = "`async fn name(ctx: ToolContext, args: Args) -> Result<Out, ToolError>` \
                     (or a plain `fn`, for a sync tool)";

const ARGUMENTS: &str =
    "name, id, title, description, needs, wants, read_only, destructive, idempotent, open_world";

/// What the attribute's arguments say.
#[derive(Default)]
struct Args {
    name: Option<LitStr>,
    id: Option<LitStr>,
    title: Option<LitStr>,
    description: Option<LitStr>,
    needs: Vec<LitStr>,
    wants: Vec<LitStr>,
    hints: Vec<(&'static str, bool)>,
}

fn strings(value: syn::parse::ParseStream<'_>, what: &str) -> syn::Result<Vec<LitStr>> {
    let array: ExprArray = value.parse().map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("#[reel::tool]: `{what}` takes a list of names, e.g. `{what} = [\"github\"]`"),
        )
    })?;
    array
        .elems
        .iter()
        .map(|elem| match elem {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => Ok(s.clone()),
            other => Err(syn::Error::new(
                other.span(),
                format!("#[reel::tool]: each of `{what}` is a string literal"),
            )),
        })
        .collect()
}

fn parse_args(attr: Tokens) -> syn::Result<Args> {
    let mut args = Args::default();
    let parser = syn::meta::parser(|meta| {
        let Some(key) = meta.path.get_ident().map(|i| i.to_string()) else {
            return Err(meta.error(format!(
                "#[reel::tool] takes plain arguments: one of {ARGUMENTS}"
            )));
        };
        let hint = match key.as_str() {
            "read_only" => Some("read_only_hint"),
            "destructive" => Some("destructive_hint"),
            "idempotent" => Some("idempotent_hint"),
            "open_world" => Some("open_world_hint"),
            _ => None,
        };
        if let Some(field) = hint {
            let value = if meta.input.peek(syn::Token![=]) {
                meta.value()?.parse::<LitBool>()?.value
            } else {
                true
            };
            args.hints.push((field, value));
            return Ok(());
        }
        let slot = match key.as_str() {
            "name" => &mut args.name,
            "id" => &mut args.id,
            "title" => &mut args.title,
            "description" => &mut args.description,
            "needs" => {
                args.needs = strings(meta.value()?, "needs")?;
                return Ok(());
            }
            "wants" => {
                args.wants = strings(meta.value()?, "wants")?;
                return Ok(());
            }
            other => {
                return Err(meta.error(format!(
                    "unknown argument `{other}` of #[reel::tool]: it takes {ARGUMENTS}"
                )))
            }
        };
        *slot = Some(meta.value()?.parse::<LitStr>().map_err(|e| {
            syn::Error::new(
                e.span(),
                format!("#[reel::tool]: `{key}` takes a string, e.g. `{key} = \"...\"`"),
            )
        })?);
        Ok(())
    });
    syn::parse::Parser::parse2(parser, attr)?;
    Ok(args)
}

/// The doc comment's text: each line without the one space `///` leaves,
/// trimmed as a whole; `None` when there is none.
fn doc_comment(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            syn::Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(syn::ExprLit {
                    lit: Lit::Str(s), ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| line.strip_prefix(' ').unwrap_or(&line).to_owned())
        .collect();
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn expand_tool(attr: Tokens, item: Tokens) -> syn::Result<Tokens> {
    let args = parse_args(attr)?;
    let function: ItemFn = match syn::parse2::<Item>(item)? {
        Item::Fn(f) => f,
        other => {
            return Err(syn::Error::new(
                other.span(),
                format!("#[reel::tool] goes on a function: {SHAPE}"),
            ))
        }
    };
    let sig = &function.sig;
    if !sig.generics.params.is_empty() {
        return Err(syn::Error::new(
            sig.generics.span(),
            "#[reel::tool] cannot derive a spec for a generic function: give the tool concrete \
             argument and result types",
        ));
    }
    if sig.inputs.len() != 2 {
        return Err(syn::Error::new(
            if sig.inputs.is_empty() { sig.ident.span() } else { sig.inputs.span() },
            format!("#[reel::tool] takes a function of two arguments, the context and the tool's input: {SHAPE}"),
        ));
    }
    let input = match &sig.inputs[1] {
        FnArg::Typed(pat) => &pat.ty,
        FnArg::Receiver(r) => {
            return Err(syn::Error::new(
                r.span(),
                format!("#[reel::tool] goes on a free function, not a method: {SHAPE}"),
            ))
        }
    };
    let ret = match &sig.output {
        ReturnType::Type(_, ty) => ty,
        ReturnType::Default => {
            return Err(syn::Error::new(
                sig.ident.span(),
                format!("#[reel::tool]: a tool returns its result: {SHAPE}"),
            ))
        }
    };
    let ident = &sig.ident;
    let vis = &function.vis;
    let maker = format_ident!("{}_tool", ident);
    let name = match &args.name {
        Some(n) => n.clone(),
        None => LitStr::new(&ident.to_string(), ident.span()),
    };
    let constructor = if sig.asyncness.is_some() {
        quote!(new)
    } else {
        quote!(new_sync)
    };
    let description = match (&args.description, doc_comment(&function.attrs)) {
        (Some(d), _) => Some(quote!(.description(#d))),
        (None, Some(d)) => Some(quote!(.description(#d))),
        (None, None) => None,
    };
    let id = args.id.as_ref().map(|v| quote!(.id(#v)));
    let title = args.title.as_ref().map(|v| quote!(.title(#v)));
    let needs = &args.needs;
    let wants = &args.wants;
    let needs = (!needs.is_empty()).then(|| quote!(.needs([#(#needs),*])));
    let wants = (!wants.is_empty()).then(|| quote!(.wants([#(#wants),*])));
    let annotations = (!args.hints.is_empty()).then(|| {
        let fields = args.hints.iter().map(|(field, value)| {
            let field = syn::Ident::new(field, Span::call_site());
            quote!(#field: ::core::option::Option::Some(#value))
        });
        quote!(.annotations(::reel::spec::Annotations {
            #(#fields,)*
            ..::core::default::Default::default()
        }))
    });
    let out = quote_spanned!(ret.span()=> <#ret as ::reel::tools::ToolResult>::Out);
    let input_ty = quote_spanned!(input.span()=> #input);
    let doc = format!(
        "The tool `{}` that `#[reel::tool]` declares on [`{ident}`]: its spec and function, \
         typed, to add to a host's `Tools` (`Tools::new().with({maker}())`).",
        name.value()
    );
    Ok(quote! {
        #function

        #[doc = #doc]
        #vis fn #maker() -> ::reel::tools::TypedTool<#input_ty, #out> {
            ::reel::tools::TypedTool::<#input_ty, #out>::#constructor(#name, #ident)
                #description #id #title #needs #wants #annotations
        }
    })
}
